import Foundation
import GatehouseContracts
import IdentityCore
import Mail

// Rows the identity ports return: the outbox, imports and Apple's queued revocations.

/// One outbox row as the delivery worker and tests see it.
public struct OutboxEntry: Sendable, Hashable {
    /// The row's id.
    public var id: Int64
    /// The mail (its body blank once sent).
    public var message: MailMessage
    /// `queued`, `sent` or `dead`.
    public var state: String
    /// Delivery attempts made so far.
    public var attempts: Int
    /// When the next attempt is due (for a queued row).
    public var nextAttemptAt: Date
    /// When the mail was enqueued.
    public var createdAt: Date
    /// When it was delivered, for a sent row.
    public var sentAt: Date?
    /// Why the last attempt failed, if it did.
    public var lastError: String?

    /// A value of these fields.
    public init(id: Int64, message: MailMessage, state: String, attempts: Int, nextAttemptAt: Date, createdAt: Date, sentAt: Date?, lastError: String?) {
        self.id = id
        self.message = message
        self.state = state
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.createdAt = createdAt
        self.sentAt = sentAt
        self.lastError = lastError
    }
}

/// One checked item of a bulk import: the record to insert when no user matches, and the change
/// that `update` mode applies to a match.
public struct ImportCandidate: Sendable {
    /// The user to insert (with the item's id or a new one).
    public var record: UserRecord
    /// Whether the item named its id: a match is looked up by id first, then by email.
    public var idGiven: Bool
    /// What `update` mode writes over a matched user.
    public var apply: @Sendable (inout UserRecord) -> Void
    /// The provider identities to link to the user inserted or updated (`ImportRules.linksIdentity`).
    public var identities: [LinkedIdentity]

    /// A checked item.
    public init(
        record: UserRecord, idGiven: Bool, identities: [LinkedIdentity] = [], apply: @escaping @Sendable (inout UserRecord) -> Void
    ) {
        self.record = record
        self.idGiven = idGiven
        self.identities = identities
        self.apply = apply
    }
}

/// What the store did with one import item.
public enum ImportWrite: Sendable, Equatable {
    /// Inserted as a new user.
    case created(UserID)
    /// A match, overwritten (`update` mode).
    case updated(UserID)
    /// A match, left as it was (`skip` mode).
    case skipped(UserID)
    /// Refused by the store (e.g. `emailExists`); nothing of the item was written.
    case failed(IdentityError)
}

/// A token waiting to be revoked at Apple.
public struct PendingAppleRevocation: Sendable, Equatable {
    /// The associated data a user's token for `subject` is sealed with (every store keeps it so).
    public static func associatedData(user: UserID, subject: String) -> String { "\(user.rawValue) \(subject)" }

    /// The row's id.
    public var id: Int64
    /// The client id the token was issued to (revoked as that client).
    public var clientID: String
    /// The sealed refresh token.
    public var sealedToken: Data
    /// The sealing's associated data (`user id` and subject, as sealed).
    public var associatedData: String
    /// Attempts so far.
    public var attempts: Int

    /// A value of these fields.
    public init(id: Int64, clientID: String, sealedToken: Data, associatedData: String, attempts: Int) {
        self.id = id
        self.clientID = clientID
        self.sealedToken = sealedToken
        self.associatedData = associatedData
        self.attempts = attempts
    }
}
