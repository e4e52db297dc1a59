import Foundation
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Mail

/// Everything the identity service keeps: the users (`UserStore`, `AnonymousSweepStore`) and the
/// narrower ports below (audit log, change log, outbox, reset codes, email codes, admin, provider
/// links, Apple tokens), one protocol each, so a flow or a worker can name only what it uses.
/// `SQLiteUserStore` (the embedded default) and `PostgresUserStore` (several instances on one
/// database) keep all of it, with the same outcomes and error codes.
///
/// Two rules hold for every store:
/// - Each write method is one transaction: the change, the mail it queues, the codes it voids,
///   the change-log entry its user change makes, and the running call's audit event
///   (`AuditScope.current`, appended by the first write transaction on that task) commit
///   together or not at all.
/// - The change log's `seq` grows in commit order without gaps, so a reader that publishes the
///   changes after the last one it saw never skips one.
///
/// Capabilities are requirements, not casts: `runIfLeader` (`LeaderElection`: one instance runs
/// each background job; the store of one instance always leads), `sharedResumeHandles` and
/// `sharedReplayGuard` (nil where one instance keeps them itself), `synchronousReads`.
public protocol IdentityStorage:
    AnonymousSweepStore, LeaderElection, AuditLogStore, ChangeLogStore, OutboxStore, PasswordResetStore, EmailCodeStore, AdminStore,
    ProviderLinkStore, AppleTokenStore
{
    /// Where resume handles live when several instances share the store; nil: in the process.
    var sharedResumeHandles: (any SharedResumeHandles)? { get }
    /// The replay guard of provider tokens shared by several instances; nil: the verifier's own.
    var sharedReplayGuard: (any SharedReplayGuard)? { get }
    /// Point reads answered on the calling thread (SQLite's memory-mapped pages); nil where every
    /// read is a round trip (PostgreSQL).
    var synchronousReads: (any SynchronousPointReads)? { get }
}

/// The audit log (`identity.listAudit`): the running call's event, pages, pruning.
public protocol AuditLogStore: Sendable {
    /// Writes the running call's pending audit event (`AuditScope.current`) in a transaction of
    /// its own: a call that changed nothing.
    func recordPendingAudit() async throws
    /// A page of the audit log (`identity.listAudit`).
    func auditEvents(_ request: ListAuditRequest) async throws -> ListAuditResponse
    /// Deletes audit events older than `cutoff`; how many went.
    @discardableResult func pruneAudit(before cutoff: Date, batch: Int) async throws -> Int
}

/// The change log of users: pages for `identity.listChanges`/`userChanges`, the publisher's tail, commits observed, pruning.
public protocol ChangeLogStore: Sendable {
    /// The changes after `afterSeq`, the head and what was pruned (`identity.listChanges`).
    func listChanges(afterSeq: UInt64, limit: Int) async throws -> ListChangesResponse
    /// A snapshot of the user, or its changes after `afterSeq` (`identity.userChanges`).
    func userChanges(id: UserID, resume: Bool, afterSeq: UInt64, limit: Int) async throws -> UserChangesResponse
    /// The changes after `afterSeq` in order, at most `limit` (the publisher's tail).
    func changes(after afterSeq: UInt64, limit: Int) async throws -> [UserChange]
    /// The newest seq ever given (0: none).
    func changeLogHead() async throws -> UInt64
    /// Calls `onCommit` (it must return at once) after a commit that added a change, wherever it
    /// was made, while the returned token lives. A store may call it more often than needed.
    func observeChangeCommits(_ onCommit: @escaping @Sendable () -> Void) -> AnyObject
    /// Deletes changes older than `cutoff`, and all but each user's newest `maxPerUser`.
    @discardableResult func pruneChanges(before cutoff: Date, maxPerUser: Int, batch: Int) async throws -> Int
    /// Deletes the anonymous user and marks its terminal change `migrated` in one transaction.
    func deleteMigratedAnonymous(id: UserID) async throws
}

/// The mail outbox: queued mails, their delivery state, purges.
public protocol OutboxStore: Sendable {
    /// Queues a mail on its own.
    func enqueueMail(_ message: MailMessage, at now: Date) async throws
    /// The queued mails due at `now`, oldest first, at most `limit`.
    func dueOutbox(at now: Date, limit: Int) async throws -> [OutboxEntry]
    /// Every row of the outbox (tests and the admin).
    func outboxEntries() async throws -> [OutboxEntry]
    /// When the next queued mail is due, or nil.
    func nextOutboxAttempt() async throws -> Date?
    /// The number of rows in `state`.
    func outboxCount(state: String) async throws -> Int
    /// Applies `attempt` to its row while the row is still queued (`OutboxRules` decides it).
    func recordOutboxAttempt(_ attempt: OutboxAttempt) async throws
    /// Deletes sent and dead rows older than `cutoff`; how many went.
    func purgeOutbox(before cutoff: Date) async throws -> Int
    /// Deletes used or expired codes older than `cutoff`; how many went.
    func purgeCodes(before cutoff: Date) async throws -> Int
}

/// Password reset codes (only their SHA-256), applied as `MailCodeRules` decides.
public protocol PasswordResetStore: Sendable {
    /// Stores a reset code and queues its mail, within the limits (see `SQLiteUserStore`).
    func storePasswordReset(
        userID: UserID, email: String, codeHash: Data, expiresAt: Date, mail: MailMessage, now: Date, perMinute: Int, perHour: Int
    ) async throws -> PasswordResetOutcome
    /// The user (and its normalized email) of an unused, unexpired reset code, or nil.
    func passwordResetUser(codeHash: Data, now: Date) async throws -> (UserID, String?)?
    /// Uses the code: sets the password, voids the user's codes, in one transaction.
    func usePasswordReset(codeHash: Data, userID: UserID, passwordHash: String, now: Date) async throws
    /// Deletes reset codes older than `cutoff`.
    func purgePasswordResets(before cutoff: Date) async throws -> Int
    /// Voids the user's unused reset codes.
    func voidPasswordResets(userID: UserID, at now: Date) async throws
}

/// Email verification and the confirmed email change with its revert, applied as `MailCodeRules` decides.
public protocol EmailCodeStore: Sendable {
    /// Inserts `user` with its verification code and mail.
    func insert(_ user: UserRecord, verification: PendingVerification) async throws
    /// Updates the user and stores a verification code with its mail.
    func update(
        id: UserID, now: Date, verification: PendingVerification, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord
    /// Stores a verification code for the user's current address, within the limits.
    func storeEmailVerification(
        userID: UserID, verification: PendingVerification, now: Date, perMinute: Int, perHour: Int
    ) async throws -> EmailVerificationOutcome
    /// Uses a verification code; the user and whether it changed.
    func useEmailVerification(codeHash: Data, now: Date) async throws -> (user: UserRecord, changed: Bool)
    /// An unused, unexpired change or revert code, or nil.
    func emailChangeCode(codeHash: Data, purpose: EmailActionPurpose, now: Date) async throws -> EmailChangeCode?
    /// Stores an email change code and queues its mail, within the limits.
    func storeEmailChange(
        userID: UserID, from fromNormalized: String, to email: EmailAddress, codeHash: Data, expiresAt: Date, now: Date,
        perMinute: Int, perHour: Int, mail: @escaping @Sendable (_ currentEmail: String) -> MailMessage
    ) async throws
    /// Confirms a change: the new address, a revert code for the old one and its notice.
    func confirmEmailChange(
        codeHash: Data, revertCodeHash: Data, revertExpiresAt: Date, now: Date,
        notice: @escaping @Sendable (_ oldEmail: String, _ newEmail: String) -> MailMessage
    ) async throws -> UserID
    /// Reverts a confirmed change, with an optional password reset.
    func revertEmailChange(codeHash: Data, now: Date, reset: RevertPasswordReset?) async throws -> UserID
}

/// The admin API's tables: admin keys, user pages and filters, operator link codes, import and export.
public protocol AdminStore: Sendable {
    /// Stores a key made elsewhere (its secret's hash).
    func insertAdminKey(_ key: AdminKey, secretHash: Data) async throws
    /// Every admin key.
    func adminKeys() async throws -> [AdminKey]
    /// Revokes a key.
    func revokeAdminKey(id: String, at now: Date) async throws -> AdminKey
    /// An unrevoked key and its secret's hash, or nil.
    func activeAdminKey(id: String) async throws -> (AdminKey, Data)?
    /// Stamps a key's last use.
    func touchAdminKey(id: String, at now: Date) async throws
    /// Users after `afterID` that pass `filter`, in id order, and whether more follow.
    func users(filter: UserFilter, after afterID: String, limit: Int) async throws -> ([UserRecord], Bool)
    /// Stores a code for a link the operator hands over.
    func storeLinkCode(
        _ kind: LinkCodeKind, userID: UserID, email: String, emailNormalized: String, codeHash: Data, expiresAt: Date, now: Date
    ) async throws
    /// Updates a user, voiding its codes when `voidingCodes`.
    func update(
        id: UserID, now: Date, voidingCodes: Bool, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord
    /// Writes a batch of imported users, each on its own.
    func importUsers(
        _ candidates: [ImportCandidate], update: Bool, now: Date, auditDetail: (@Sendable ([ImportWrite]) -> String)?
    ) async throws -> [ImportWrite]
    /// A page of users in id order (export).
    func users(after afterID: String, limit: Int) async throws -> [UserRecord]
    /// The provider identities of `users` (export), each user's sorted by provider and subject;
    /// a user without one is absent.
    func identities(of users: [UserID]) async throws -> [UserID: [LinkedIdentity]]
}

/// The transaction seam: a flow that writes one user's row together with other things (its
/// identities today; factors, devices and codes as they come) reads the `UserState`, decides in
/// the core (a pure function to `UserWrites` or a refusal) and has the store apply the writes,
/// all in one transaction under the user's row lock. The store reads and applies; it decides
/// nothing.
public protocol UserTransactions: UserStore {
    /// Reads the user `id` and its identities (the row locked), calls `decide` with them, and
    /// applies the `UserWrites` it returns at `now` in the same transaction; returns the user as
    /// written (as read when the writes leave the row alone) and `decide`'s value. `userNotFound`
    /// when there is no such user; whatever `decide` throws, with nothing written.
    func transact<T: Sendable>(
        userID id: UserID, now: Date, _ decide: @escaping @Sendable (UserState) throws -> (UserWrites, T)
    ) async throws -> (UserRecord, T)
}

/// Provider identities linked to users (seed 002's five cases).
public protocol ProviderLinkStore: UserTransactions {
    /// Inserts a user with its first provider identity.
    func insert(_ user: UserRecord, identity provider: String, subject: String) async throws -> UserRecord
    /// The user's subjects at `provider`.
    func subjects(provider: String, of id: UserID) async throws -> [String]
}

extension ProviderLinkStore {
    /// Links (`provider`, `subject`) to the user `id` and applies `change` to it, in one
    /// transaction (`ProviderLinkRules.link`: the version moves, `providers` lists the provider).
    public func link(
        provider: String, subject: String, to id: UserID, now: Date, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        let identity = LinkedIdentity(provider: provider, subject: subject)
        return try await transact(userID: id, now: now) { state in (try ProviderLinkRules.link(state, identity, change: change), ()) }.0
    }

    /// Removes the user's identities of `provider`, in one transaction with its row
    /// (`ProviderLinkRules.unlink`).
    public func unlink(provider: String, from id: UserID, now: Date) async throws -> UserRecord {
        try await transact(userID: id, now: now) { state in (try ProviderLinkRules.unlink(state, provider: provider), ()) }.0
    }
}

/// Sign in with Apple's refresh tokens, sealed, and the queue of their revocations.
public protocol AppleTokenStore: Sendable {
    /// Stores a sealed Apple refresh token for the user's Apple identity.
    func storeAppleToken(user: UserID, subject: String, clientID: String, sealed: Data, at: Date) async throws -> Bool
    /// Revocations due at `now`.
    func dueAppleRevocations(now: Date, limit: Int) async throws -> [PendingAppleRevocation]
    /// Claims a revocation until `until`; false when another worker holds it.
    func claimAppleRevocation(id: Int64, now: Date, until: Date) async throws -> Bool
    /// Deletes a done revocation.
    func finishAppleRevocation(id: Int64) async throws
    /// Schedules another attempt.
    func retryAppleRevocation(id: Int64, at next: Date) async throws
}

extension AuditLogStore {
    /// `pruneAudit(before:batch:)` in batches of 5,000.
    @discardableResult public func pruneAudit(before cutoff: Date) async throws -> Int {
        try await pruneAudit(before: cutoff, batch: 5000)
    }
}

extension ChangeLogStore {
    /// `pruneChanges(before:maxPerUser:batch:)` in batches of 5,000.
    @discardableResult public func pruneChanges(before cutoff: Date, maxPerUser: Int) async throws -> Int {
        try await pruneChanges(before: cutoff, maxPerUser: maxPerUser, batch: 5000)
    }
}

extension EmailCodeStore {
    /// A revert without a password reset.
    public func revertEmailChange(codeHash: Data, now: Date) async throws -> UserID {
        try await revertEmailChange(codeHash: codeHash, now: now, reset: nil)
    }
}

extension AdminStore {
    /// An import without an audit detail.
    public func importUsers(_ candidates: [ImportCandidate], update: Bool, now: Date) async throws -> [ImportWrite] {
        try await importUsers(candidates, update: update, now: now, auditDetail: nil)
    }
}
