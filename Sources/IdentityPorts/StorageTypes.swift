import Foundation
import IdentityCore
import Mail

// The value types of the `IdentityStorage` contract (the arguments and outcomes of its account
// flows), shared by every store.

/// The filters of `users(filter:)`.
public struct UserFilter: Sendable {
    /// Normalized email starts with this; "" for any.
    public var emailPrefix = ""
    /// Linked to this provider; "" for any.
    public var provider = ""
    /// Disabled or not; nil for both.
    public var disabled: Bool?
    /// Anonymous or not; nil for both.
    public var anonymous: Bool?
    /// Created at or after.
    public var createdAfter: Date?
    /// Created before.
    public var createdBefore: Date?
    /// No filter.
    public init() {}
}

/// An unused, unexpired `change_email` or `revert_email` code, as the handlers check it
/// before acting (the write checks it again).
public struct EmailChangeCode: Sendable, Equatable {
    /// The user the code is for.
    public var userID: UserID
    /// The address the code makes the user's (change) or restores (revert), as typed.
    public var email: String
    /// `email` normalized.
    public var emailNormalized: String
    /// The user's address when the code was made.
    public var fromEmailNormalized: String?
    /// Revert: whether the restored address was verified before the change.
    public var previousVerified: Bool

    /// A value of these fields.
    public init(userID: UserID, email: String, emailNormalized: String, fromEmailNormalized: String?, previousVerified: Bool) {
        self.userID = userID
        self.email = email
        self.emailNormalized = emailNormalized
        self.fromEmailNormalized = fromEmailNormalized
        self.previousVerified = previousVerified
    }
}

/// What a revert stores to end the password: a reset code (its hash and expiry) and its mail
/// to the restored address.
public struct RevertPasswordReset: Sendable {
    /// The SHA-256 of the new reset code.
    public var codeHash: Data
    /// When the reset code stops working.
    public var expiresAt: Date
    /// The reset mail, given the restored address.
    public var mail: @Sendable (String) -> MailMessage

    /// A reset to store with a revert.
    public init(codeHash: Data, expiresAt: Date, mail: @escaping @Sendable (String) -> MailMessage) {
        self.codeHash = codeHash
        self.expiresAt = expiresAt
        self.mail = mail
    }

    /// The reset code to store.
    public var code: NewResetCode { NewResetCode(codeHash: codeHash, expiresAt: expiresAt) }
}

/// A verification code to store: its hash, the address it verifies, its expiry and its mail.
public struct PendingVerification: Sendable {
    /// SHA-256 of the code (the code itself is never stored).
    public var codeHash: Data
    /// The address as typed (the mail's recipient).
    public var email: String
    /// The normalized address: the code works only while it is the user's.
    public var emailNormalized: String
    /// When the code stops working.
    public var expiresAt: Date
    /// The verification mail, queued in the same transaction.
    public var mail: MailMessage

    /// A code for `email` (`emailNormalized`), expiring at `expiresAt`, mailed with `mail`.
    public init(codeHash: Data, email: String, emailNormalized: String, expiresAt: Date, mail: MailMessage) {
        self.codeHash = codeHash
        self.email = email
        self.emailNormalized = emailNormalized
        self.expiresAt = expiresAt
        self.mail = mail
    }

    /// The code's `email_actions` row (`verify_email`).
    public var emailAction: NewEmailAction {
        NewEmailAction(purpose: .verifyEmail, codeHash: codeHash, email: email, emailNormalized: emailNormalized, expiresAt: expiresAt)
    }
}
