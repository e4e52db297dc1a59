import Foundation
import GatehouseContracts
import IdentityCore
import IdentityPorts
import Mail
import GatehouseSupport

/// An `IdentityStorage` that hands every call to `inner`: a test subclasses it and overrides the
/// one method whose timing or failure it needs to control (a race made deterministic, a fault).
open class ForwardingIdentityStorage: IdentityStorage, @unchecked Sendable {
    /// The store every call goes to.
    public let inner: any IdentityStorage

    /// A store forwarding to `inner`.
    public init(_ inner: any IdentityStorage) { self.inner = inner }

    /// Forwards to `inner`.
    open func runIfLeader(_ job: String, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        try await inner.runIfLeader(job, body)
    }
    /// Forwards to `inner`.
    open func insert(_ user: UserRecord) async throws { try await inner.insert(user) }
    /// Forwards to `inner`.
    open func user(id: UserID) async throws -> UserRecord? { try await inner.user(id: id) }
    /// Forwards to `inner`.
    open func user(normalizedEmail: String) async throws -> UserRecord? { try await inner.user(normalizedEmail: normalizedEmail) }
    /// Forwards to `inner`.
    open func update(id: UserID, expectedVersion: Int64?, now: Date, _ change: @escaping @Sendable (inout UserRecord) throws -> Void) async throws -> UserRecord { try await inner.update(id: id, expectedVersion: expectedVersion, now: now, change) }
    /// Forwards to `inner`.
    open func recordSignIn(id: UserID, at: Date, newPasswordHash: String?, replacing: String?) async throws { try await inner.recordSignIn(id: id, at: at, newPasswordHash: newPasswordHash, replacing: replacing) }
    /// Forwards to `inner`.
    open func delete(id: UserID) async throws { try await inner.delete(id: id) }
    /// Forwards to `inner`.
    open func linkIdentity(provider: String, subject: String, to user: UserID, at: Date) async throws { try await inner.linkIdentity(provider: provider, subject: subject, to: user, at: at) }
    /// Forwards to `inner`.
    open func userID(provider: String, subject: String) async throws -> UserID? { try await inner.userID(provider: provider, subject: subject) }
    /// Forwards to `inner`.
    open func count() async throws -> Int { try await inner.count() }
    /// Forwards to `inner`.
    open func deleteAnonymous(id: UserID) async throws { try await inner.deleteAnonymous(id: id) }
    /// Forwards to `inner`.
    open func anonymousCandidates(inactiveBefore cutoff: Date, limit: Int) async throws -> [AnonymousCandidate] { try await inner.anonymousCandidates(inactiveBefore: cutoff, limit: limit) }
    /// Forwards to `inner`.
    open func recordSessionActivity(_ activity: [UserID: Date]) async throws { try await inner.recordSessionActivity(activity) }
    /// Forwards to `inner`.
    open func deleteAnonymous(id: UserID, inactiveBefore cutoff: Date) async throws -> Bool { try await inner.deleteAnonymous(id: id, inactiveBefore: cutoff) }
    /// Forwards to `inner`.
    open var sharedResumeHandles: (any SharedResumeHandles)? { inner.sharedResumeHandles }
    /// Forwards to `inner`.
    open var sharedReplayGuard: (any SharedReplayGuard)? { inner.sharedReplayGuard }
    /// Nil: a forwarding store's reads go through its (overridable) async methods.
    open var synchronousReads: (any SynchronousPointReads)? { nil }
    /// Forwards to `inner`.
    open func recordPendingAudit() async throws { try await inner.recordPendingAudit() }
    /// Forwards to `inner`.
    open func auditEvents(_ request: ListAuditRequest) async throws -> ListAuditResponse { try await inner.auditEvents(request) }
    /// Forwards to `inner`.
    @discardableResult open func pruneAudit(before cutoff: Date, batch: Int) async throws -> Int { try await inner.pruneAudit(before: cutoff, batch: batch) }
    /// Forwards to `inner`.
    open func listChanges(afterSeq: UInt64, limit: Int) async throws -> ListChangesResponse { try await inner.listChanges(afterSeq: afterSeq, limit: limit) }
    /// Forwards to `inner`.
    open func userChanges(id: UserID, resume: Bool, afterSeq: UInt64, limit: Int) async throws -> UserChangesResponse { try await inner.userChanges(id: id, resume: resume, afterSeq: afterSeq, limit: limit) }
    /// Forwards to `inner`.
    open func changes(after afterSeq: UInt64, limit: Int) async throws -> [UserChange] { try await inner.changes(after: afterSeq, limit: limit) }
    /// Forwards to `inner`.
    open func changeLogHead() async throws -> UInt64 { try await inner.changeLogHead() }
    /// Forwards to `inner`.
    open func observeChangeCommits(_ onCommit: @escaping @Sendable () -> Void) -> AnyObject { inner.observeChangeCommits(onCommit) }
    /// Forwards to `inner`.
    @discardableResult open func pruneChanges(before cutoff: Date, maxPerUser: Int, batch: Int) async throws -> Int { try await inner.pruneChanges(before: cutoff, maxPerUser: maxPerUser, batch: batch) }
    /// Forwards to `inner`.
    open func deleteMigratedAnonymous(id: UserID) async throws { try await inner.deleteMigratedAnonymous(id: id) }
    /// Forwards to `inner`.
    open func enqueueMail(_ message: MailMessage, at now: Date) async throws { try await inner.enqueueMail(message, at: now) }
    /// Forwards to `inner`.
    open func dueOutbox(at now: Date, limit: Int) async throws -> [OutboxEntry] { try await inner.dueOutbox(at: now, limit: limit) }
    /// Forwards to `inner`.
    open func outboxEntries() async throws -> [OutboxEntry] { try await inner.outboxEntries() }
    /// Forwards to `inner`.
    open func nextOutboxAttempt() async throws -> Date? { try await inner.nextOutboxAttempt() }
    /// Forwards to `inner`.
    open func outboxCount(state: String) async throws -> Int { try await inner.outboxCount(state: state) }
    /// Forwards to `inner`.
    open func recordOutboxAttempt(_ attempt: OutboxAttempt) async throws { try await inner.recordOutboxAttempt(attempt) }
    /// Forwards to `inner`.
    open func purgeOutbox(before cutoff: Date) async throws -> Int { try await inner.purgeOutbox(before: cutoff) }
    /// Forwards to `inner`.
    open func purgeCodes(before cutoff: Date) async throws -> Int { try await inner.purgeCodes(before: cutoff) }
    /// Forwards to `inner`.
    open func storePasswordReset(userID: UserID, email: String, codeHash: Data, expiresAt: Date, mail: MailMessage, now: Date, perMinute: Int, perHour: Int) async throws -> PasswordResetOutcome { try await inner.storePasswordReset(userID: userID, email: email, codeHash: codeHash, expiresAt: expiresAt, mail: mail, now: now, perMinute: perMinute, perHour: perHour) }
    /// Forwards to `inner`.
    open func passwordResetUser(codeHash: Data, now: Date) async throws -> (UserID, String?)? { try await inner.passwordResetUser(codeHash: codeHash, now: now) }
    /// Forwards to `inner`.
    open func usePasswordReset(codeHash: Data, userID: UserID, passwordHash: String, now: Date) async throws { try await inner.usePasswordReset(codeHash: codeHash, userID: userID, passwordHash: passwordHash, now: now) }
    /// Forwards to `inner`.
    open func purgePasswordResets(before cutoff: Date) async throws -> Int { try await inner.purgePasswordResets(before: cutoff) }
    /// Forwards to `inner`.
    open func voidPasswordResets(userID: UserID, at now: Date) async throws { try await inner.voidPasswordResets(userID: userID, at: now) }
    /// Forwards to `inner`.
    open func insert(_ user: UserRecord, verification: PendingVerification) async throws { try await inner.insert(user, verification: verification) }
    /// Forwards to `inner`.
    open func update(id: UserID, now: Date, verification: PendingVerification, _ change: @escaping @Sendable (inout UserRecord) throws -> Void) async throws -> UserRecord { try await inner.update(id: id, now: now, verification: verification, change) }
    /// Forwards to `inner`.
    open func storeEmailVerification(userID: UserID, verification: PendingVerification, now: Date, perMinute: Int, perHour: Int) async throws -> EmailVerificationOutcome { try await inner.storeEmailVerification(userID: userID, verification: verification, now: now, perMinute: perMinute, perHour: perHour) }
    /// Forwards to `inner`.
    open func useEmailVerification(codeHash: Data, now: Date) async throws -> (user: UserRecord, changed: Bool) { try await inner.useEmailVerification(codeHash: codeHash, now: now) }
    /// Forwards to `inner`.
    open func emailChangeCode(codeHash: Data, purpose: EmailActionPurpose, now: Date) async throws -> EmailChangeCode? { try await inner.emailChangeCode(codeHash: codeHash, purpose: purpose, now: now) }
    /// Forwards to `inner`.
    open func storeEmailChange(userID: UserID, from fromNormalized: String, to email: EmailAddress, codeHash: Data, expiresAt: Date, now: Date, perMinute: Int, perHour: Int, mail: @escaping @Sendable (_ currentEmail: String) -> MailMessage) async throws { try await inner.storeEmailChange(userID: userID, from: fromNormalized, to: email, codeHash: codeHash, expiresAt: expiresAt, now: now, perMinute: perMinute, perHour: perHour, mail: mail) }
    /// Forwards to `inner`.
    open func confirmEmailChange(codeHash: Data, revertCodeHash: Data, revertExpiresAt: Date, now: Date, notice: @escaping @Sendable (_ oldEmail: String, _ newEmail: String) -> MailMessage) async throws -> UserID { try await inner.confirmEmailChange(codeHash: codeHash, revertCodeHash: revertCodeHash, revertExpiresAt: revertExpiresAt, now: now, notice: notice) }
    /// Forwards to `inner`.
    open func revertEmailChange(codeHash: Data, now: Date, reset: RevertPasswordReset?) async throws -> UserID { try await inner.revertEmailChange(codeHash: codeHash, now: now, reset: reset) }
    /// Forwards to `inner`.
    open func insertAdminKey(_ key: AdminKey, secretHash: Data) async throws { try await inner.insertAdminKey(key, secretHash: secretHash) }
    /// Forwards to `inner`.
    open func adminKeys() async throws -> [AdminKey] { try await inner.adminKeys() }
    /// Forwards to `inner`.
    open func revokeAdminKey(id: String, at now: Date) async throws -> AdminKey { try await inner.revokeAdminKey(id: id, at: now) }
    /// Forwards to `inner`.
    open func activeAdminKey(id: String) async throws -> (AdminKey, Data)? { try await inner.activeAdminKey(id: id) }
    /// Forwards to `inner`.
    open func touchAdminKey(id: String, at now: Date) async throws { try await inner.touchAdminKey(id: id, at: now) }
    /// Forwards to `inner`.
    open func users(filter: UserFilter, after afterID: String, limit: Int) async throws -> ([UserRecord], Bool) { try await inner.users(filter: filter, after: afterID, limit: limit) }
    /// Forwards to `inner`.
    open func storeLinkCode(_ kind: LinkCodeKind, userID: UserID, email: String, emailNormalized: String, codeHash: Data, expiresAt: Date, now: Date) async throws { try await inner.storeLinkCode(kind, userID: userID, email: email, emailNormalized: emailNormalized, codeHash: codeHash, expiresAt: expiresAt, now: now) }
    /// Forwards to `inner`.
    open func update(id: UserID, now: Date, voidingCodes: Bool, _ change: @escaping @Sendable (inout UserRecord) throws -> Void) async throws -> UserRecord { try await inner.update(id: id, now: now, voidingCodes: voidingCodes, change) }
    /// Forwards to `inner`.
    open func importUsers(_ candidates: [ImportCandidate], update: Bool, now: Date, auditDetail: (@Sendable ([ImportWrite]) -> String)?) async throws -> [ImportWrite] { try await inner.importUsers(candidates, update: update, now: now, auditDetail: auditDetail) }
    /// Forwards to `inner`.
    open func users(after afterID: String, limit: Int) async throws -> [UserRecord] { try await inner.users(after: afterID, limit: limit) }
    /// Forwards to `inner`.
    open func identities(of users: [UserID]) async throws -> [UserID: [LinkedIdentity]] { try await inner.identities(of: users) }
    /// Forwards to `inner`.
    open func insert(_ user: UserRecord, identity provider: String, subject: String) async throws -> UserRecord { try await inner.insert(user, identity: provider, subject: subject) }
    /// Forwards to `inner`.
    open func transact<T: Sendable>(userID id: UserID, now: Date, _ decide: @escaping @Sendable (UserState) throws -> (UserWrites, T)) async throws -> (UserRecord, T) { try await inner.transact(userID: id, now: now, decide) }
    /// Forwards to `inner`.
    open func subjects(provider: String, of id: UserID) async throws -> [String] { try await inner.subjects(provider: provider, of: id) }
    /// Forwards to `inner`.
    open func storeAppleToken(user: UserID, subject: String, clientID: String, sealed: Data, at: Date) async throws -> Bool { try await inner.storeAppleToken(user: user, subject: subject, clientID: clientID, sealed: sealed, at: at) }
    /// Forwards to `inner`.
    open func dueAppleRevocations(now: Date, limit: Int) async throws -> [PendingAppleRevocation] { try await inner.dueAppleRevocations(now: now, limit: limit) }
    /// Forwards to `inner`.
    open func claimAppleRevocation(id: Int64, now: Date, until: Date) async throws -> Bool { try await inner.claimAppleRevocation(id: id, now: now, until: until) }
    /// Forwards to `inner`.
    open func finishAppleRevocation(id: Int64) async throws { try await inner.finishAppleRevocation(id: id) }
    /// Forwards to `inner`.
    open func retryAppleRevocation(id: Int64, at next: Date) async throws { try await inner.retryAppleRevocation(id: id, at: next) }
}
