import Foundation

// Wire messages of password reset (issue 19 §2, scenario A30; proto/identity.proto).

/// `identity.requestPasswordReset` request: mail a reset code to `email` if it has an account.
/// The answer (`Empty`) is the same whether or not it has one; the work happens after it.
public struct PasswordResetRequest: Codable, Sendable, Hashable {
    /// The address typed by the user; refused with `invalid_email` when malformed.
    public var email: String
    /// The mail's language preferences, best first (`ja,en`, from the gateway's `Accept-Language`; at most
    /// 64 bytes): the first language with templates, else `en`.
    public var locale: String
    /// The client asking (address and user agent), for the log.
    public var client: ClientInfo

    /// A reset request for `email`, the mail in `locale`.
    public init(email: String, locale: String = "en", client: ClientInfo = ClientInfo()) {
        self.email = email
        self.locale = locale
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case email = 1, locale = 2, client = 3 }
}

/// `identity.confirmPasswordReset` request: sets a new password with a code from a reset mail.
public struct ConfirmPasswordResetRequest: Codable, Sendable, Hashable {
    /// The code from the mail (base64url of 32 random bytes).
    public var code: String
    /// The new password; refused with `weak_password` when the policy does not accept it.
    public var password: String
    /// The client confirming.
    public var client: ClientInfo

    /// A confirmation of `code` with the new `password`.
    public init(code: String, password: String, client: ClientInfo = ClientInfo()) {
        self.code = code
        self.password = password
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case code = 1, password = 2, client = 3 }
}

/// `identity.confirmPasswordReset` reply.
public struct ConfirmPasswordResetResponse: Codable, Sendable, Hashable {
    /// Every session of the user, revoked (committed in the token service before this reply)
    /// so the gateway refuses their access tokens at once.
    public var revokedSessionIDs: [String]

    /// A reply naming the revoked sessions.
    public init(revokedSessionIDs: [String] = []) {
        self.revokedSessionIDs = revokedSessionIDs
    }

    enum CodingKeys: Int, CodingKey { case revokedSessionIDs = 1 }
}

extension IdentityAPI {
    /// Answers at once; then, only for an account that exists and is not disabled (and within
    /// the per-address mail limit), stores a new reset code (older ones stop working) and queues
    /// the mail, in one transaction. Errors: `invalid_email`, `invalid_argument` (client).
    public static let requestPasswordReset = RPCMethod<PasswordResetRequest, Empty>(
        name: "identity.requestPasswordReset", callers: [.gateway])
    /// Sets the password of the code's user (the policy applies), marks the code used, and
    /// revokes every session of the user (committed) before answering. Errors:
    /// `invalid_reset_code` (unknown, expired or used), `weak_password`, `user_disabled`.
    public static let confirmPasswordReset = RPCMethod<ConfirmPasswordResetRequest, ConfirmPasswordResetResponse>(
        name: "identity.confirmPasswordReset", callers: [.gateway])
}
