import Foundation
import GatehouseSupport

// The values the mail-code decisions (`MailCodeRules`) take and the outcomes they give: what a
// store read of a user and of its stored codes, and what a new code is. Times read from a store
// are whole milliseconds since 1970, as the stores keep them, so the decisions compare exactly
// what the SQL compared.

/// What an `email_actions` row's code does.
public enum EmailActionPurpose: String, Sendable, CaseIterable {
    /// Verifies `email` if it is still the user's address.
    case verifyEmail = "verify_email"
    /// Makes `email` the user's address (if the address is still `fromEmailNormalized`).
    case changeEmail = "change_email"
    /// Restores `email` (the old address; `previousVerified` its verified state) and revokes
    /// every session of the user.
    case revertEmail = "revert_email"
}

/// The kinds of code an operator can make a link for.
public enum LinkCodeKind: String, Sendable {
    /// A password reset code (`password_resets`).
    case passwordReset = "password_reset"
    /// An email verification code (`email_actions`, `verify_email`).
    case verifyEmail = "verify_email"
}

/// What `storeEmailVerification` did.
public enum EmailVerificationOutcome: Sendable, Equatable {
    /// The code is stored (older ones voided) and the mail queued.
    case queued
    /// The user had verification mails too recently: nothing written; one more is allowed
    /// after this many seconds.
    case limited(retryAfterSeconds: Int)
    /// The address is already verified: nothing written.
    case alreadyVerified
    /// The user is gone, disabled, or no longer has this address: nothing written.
    case noAccount
}

/// What `storePasswordReset` did.
public enum PasswordResetOutcome: Sendable, Equatable {
    /// The code is stored (older ones voided) and the mail queued.
    case queued
    /// The address had a reset mail too recently (per-minute or per-hour limit): nothing written.
    case limited
    /// The user is gone, disabled, or no longer has this email: nothing written.
    case noAccount
}

/// What the mail-code decisions need of a user row, as the store read it in the write's
/// transaction (on PostgreSQL under the row's lock).
public struct MailCodeUser: Sendable, Equatable {
    /// The user's id.
    public var id: UserID
    /// The address as typed; nil for an anonymous user.
    public var email: String?
    /// The normalized address; nil for an anonymous user.
    public var emailNormalized: String?
    /// Whether the address is verified.
    public var emailVerified: Bool
    /// Whether the user is disabled.
    public var disabled: Bool
    /// The stored version (a refused change reports it).
    public var version: Int64

    /// A user of these fields.
    public init(id: UserID, email: String?, emailNormalized: String?, emailVerified: Bool, disabled: Bool, version: Int64) {
        self.id = id
        self.email = email
        self.emailNormalized = emailNormalized
        self.emailVerified = emailVerified
        self.disabled = disabled
        self.version = version
    }

    /// What the decisions need of `record`.
    public init(_ record: UserRecord) {
        self.init(
            id: record.id, email: record.email, emailNormalized: record.emailNormalized, emailVerified: record.emailVerified,
            disabled: record.disabled, version: record.version)
    }

    /// Whether a code for the normalized address `normalized` may be made for the user: it is
    /// enabled and still has that address.
    public func takesCodes(at normalized: String) -> Bool {
        !disabled && emailNormalized == normalized
    }
}

/// A stored password reset code (a `password_resets` row), found by its hash in any state.
public struct StoredResetCode: Sendable, Equatable {
    /// The row's id.
    public var id: Int64
    /// The user the code is for.
    public var userID: UserID
    /// When it stops working (milliseconds since 1970).
    public var expiresAt: Int64
    /// When it was used or voided (milliseconds since 1970); nil while unused.
    public var usedAt: Int64?

    /// A row of these fields.
    public init(id: Int64, userID: UserID, expiresAt: Int64, usedAt: Int64?) {
        self.id = id
        self.userID = userID
        self.expiresAt = expiresAt
        self.usedAt = usedAt
    }

    /// Whether the code still works at `now`: unused and not expired (it expires AT `expiresAt`).
    public func isLive(at now: Date) -> Bool {
        usedAt == nil && expiresAt > now.millisecondsSince1970
    }
}

/// A stored email action code (an `email_actions` row), found by its hash in any state.
public struct StoredEmailAction: Sendable, Equatable {
    /// The row's id (ids grow in the order the codes were made).
    public var id: Int64
    /// What the code does.
    public var purpose: EmailActionPurpose
    /// The user the code is for.
    public var userID: UserID
    /// The address the code is about (verified, changed to, or restored), as typed.
    public var email: String
    /// `email` normalized.
    public var emailNormalized: String
    /// The user's normalized address when the code was made (change and revert codes).
    public var fromEmailNormalized: String?
    /// Revert: whether the restored address was verified before the change.
    public var previousVerified: Bool
    /// When it stops working (milliseconds since 1970).
    public var expiresAt: Int64
    /// When it was used or voided (milliseconds since 1970); nil while unused.
    public var usedAt: Int64?

    /// A row of these fields.
    public init(
        id: Int64, purpose: EmailActionPurpose, userID: UserID, email: String, emailNormalized: String,
        fromEmailNormalized: String?, previousVerified: Bool, expiresAt: Int64, usedAt: Int64?
    ) {
        self.id = id
        self.purpose = purpose
        self.userID = userID
        self.email = email
        self.emailNormalized = emailNormalized
        self.fromEmailNormalized = fromEmailNormalized
        self.previousVerified = previousVerified
        self.expiresAt = expiresAt
        self.usedAt = usedAt
    }

    /// Whether the code works for `purpose` at `now`: of that purpose, unused and not expired.
    public func isLive(for purpose: EmailActionPurpose, at now: Date) -> Bool {
        self.purpose == purpose && usedAt == nil && expiresAt > now.millisecondsSince1970
    }
}

/// A password reset code to store: only its SHA-256 and its expiry.
public struct NewResetCode: Sendable, Equatable {
    /// The SHA-256 of the code.
    public var codeHash: Data
    /// When the code stops working.
    public var expiresAt: Date

    /// A code of this hash, expiring at `expiresAt`.
    public init(codeHash: Data, expiresAt: Date) {
        self.codeHash = codeHash
        self.expiresAt = expiresAt
    }
}

/// An email action code to store (an `email_actions` row).
public struct NewEmailAction: Sendable, Equatable {
    /// What the code does.
    public var purpose: EmailActionPurpose
    /// The SHA-256 of the code.
    public var codeHash: Data
    /// The address the code is about, as typed.
    public var email: String
    /// `email` normalized.
    public var emailNormalized: String
    /// The user's normalized address when the code is made (change and revert codes).
    public var fromEmailNormalized: String?
    /// Revert: whether the restored address was verified before the change.
    public var previousVerified: Bool
    /// When the code stops working.
    public var expiresAt: Date

    /// A code of these fields.
    public init(
        purpose: EmailActionPurpose, codeHash: Data, email: String, emailNormalized: String, fromEmailNormalized: String? = nil,
        previousVerified: Bool = false, expiresAt: Date
    ) {
        self.purpose = purpose
        self.codeHash = codeHash
        self.email = email
        self.emailNormalized = emailNormalized
        self.fromEmailNormalized = fromEmailNormalized
        self.previousVerified = previousVerified
        self.expiresAt = expiresAt
    }
}
