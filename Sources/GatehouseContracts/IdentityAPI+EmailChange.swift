import Foundation

// The confirmed email change (issue 19 §4; proto/identity.proto). `identity.changeEmail`
// (IdentityAPI+Account.swift) mails a code to the new address; these apply or undo the change.

extension IdentityAPI {
    /// Applies a pending email change with the code mailed to the new address: the user's email
    /// becomes the new one (verified), and the old address gets a notice with a revert code.
    /// Errors: `invalid_email_change_code`, `email_exists` (taken meanwhile), `user_disabled`.
    public static let confirmEmailChange = RPCMethod<EmailCodeRequest, EmailCodeResponse>(
        name: "identity.confirmEmailChange", callers: [.gateway])
    /// Undoes a confirmed email change with the code mailed to the old address: the old address
    /// comes back and every session of the user is revoked (committed before the reply).
    /// Errors: `invalid_email_change_code`, `email_exists` (the old address was taken meanwhile).
    public static let revertEmailChange = RPCMethod<EmailCodeRequest, EmailCodeResponse>(
        name: "identity.revertEmailChange", callers: [.gateway])
}
