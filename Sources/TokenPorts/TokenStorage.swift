import Foundation
import TokenCore
import GatehouseContracts
import GatehouseSupport

/// Where the token service keeps signing keys, sessions, refresh tokens and its audit log: the
/// SQLite file of one instance (`SQLiteTokenStore`, module `SQLiteStores`, the embedded default)
/// or a PostgreSQL database shared by several instances (`PostgresTokenStore`, module
/// `PostgresStores`). The service sees only this port; the composition root picks the store.
///
/// The row and outcome types are the port's own (`StoredSession`, `StoredSigningKey`,
/// `RotationOutcome`, `SweepCounts`): one shape, whichever store holds them. What a write decides
/// is decided once, in `TokenCore` (`RefreshRotation`) or here (`RevocationAudit`); a store reads,
/// and applies the decision. Implementations let no error of their own escape: failures become
/// `RPCError`s (`unavailable` when the database cannot be reached or is busy, `internal`
/// otherwise). Every write is durable before the call returns.
///
/// Capabilities are requirements: `runIfLeader` (`LeaderElection`: one instance runs each
/// background job; a store of one instance always leads) and `sharedRevocationLog` (nil where one
/// instance numbers its own revocations).
public protocol TokenStorage: LeaderElection {
    /// The store's revocation log when several instances share it (they then publish every
    /// instance's revocations, numbered by the store); nil for a store of one instance.
    var sharedRevocationLog: (any SharedRevocationLog)? { get }

    /// Applies pending schema migrations (once, however many instances start at once).
    func migrate() async throws

    // MARK: Secrets and keys

    /// A stored secret, created with `make` on first use. Instances starting at once agree on one
    /// value: the first stored wins, and every caller gets it.
    func secret(named name: String, make: @escaping @Sendable () -> Data) async throws -> Data
    /// Replaces the stored secret `name` with `value`, leaving no copy of the old value behind
    /// where the store can avoid it.
    func replaceSecret(named name: String, with value: Data) async throws
    /// Seals every signing key stored in plain text with `seal`; how many it sealed.
    func sealPlaintextKeys(_ seal: @escaping @Sendable (Data) throws -> Data) async throws -> Int
    /// After secrets were replaced: drops what the store still keeps of the old values (SQLite's
    /// WAL); nothing where the store keeps none the process can reach.
    func scrubFreedPages() async throws

    /// Every stored key, oldest first.
    func keys() async throws -> [StoredSigningKey]
    /// Adds `key`, to sign from `key.activatesAt`: the key signing until then stops at that
    /// instant and stays published until `previousRetireAfter`; appends `audit` in the same
    /// transaction. With `ifNewestBefore`, adds it only when the newest stored key was made before
    /// that time, deciding in the store: of instances sharing it that try at once, one rotates.
    /// Whether it added the key.
    @discardableResult
    func insertKey(_ key: StoredSigningKey, previousRetireAfter: Date, audit: AuditEvent?, ifNewestBefore: Date?) async throws -> Bool
    /// Adds `key` as the first signing key unless a key exists already; whether it did. Instances
    /// starting together on an empty database make one first key.
    func insertFirstKey(_ key: StoredSigningKey) async throws -> Bool

    // MARK: Sessions

    /// Stores a new session with its first refresh token (by hash).
    func createSession(_ session: StoredSession, refreshHash: Data) async throws
    /// The session a refresh token belongs to (whatever the token's state).
    func session(forRefreshHash hash: Data) async throws -> StoredSession?
    /// The session with this id, or nil.
    func session(id: String) async throws -> StoredSession?
    /// The user's sessions, oldest first.
    func sessions(userID: String) async throws -> [StoredSession]
    /// Rotates the refresh token `hash` to `successorHash` atomically (`RefreshRotation` decides):
    /// of two rotations of one token, wherever they run, exactly one rotates.
    func rotate(hash: Data, successorHash: Data, now: Date, grace: TimeInterval, idleTimeout: TimeInterval) async throws
        -> RotationOutcome
    /// The session's current refresh-token hash (for tests).
    func currentHash(sessionID: String) async throws -> Data?
    /// Revokes one session; returns it if it was active.
    func revoke(sessionID: String, reason: String, at now: Date) async throws -> StoredSession?
    /// Whether a session is revoked (or unknown).
    func isRevoked(sessionID: String) async throws -> Bool
    /// Revokes every active session of a user but `except`, in one transaction; returns those
    /// revoked. With `scrubClient`, blanks the user agent and IP address of all its sessions.
    func revokeAll(userID: String, reason: String, at now: Date, except: String?, scrubClient: Bool) async throws
        -> [StoredSession]
    /// The sessions revoked after `since`, oldest first.
    func revokedSessions(since: Date) async throws -> [RevokedSession]
    /// The ids of `userID`'s sessions revoked after `since`.
    func revokedSessionIDs(userID: String, since: Date) async throws -> [String]
    /// For each user with a stored session, the latest `lastUsedAt` of its sessions.
    func lastActivity(userIDs: [String]) async throws -> [String: Date]

    // MARK: Upkeep and audit

    /// Deletes what `cutoffs` names (sessions, then refresh tokens), in writes of at most
    /// `batch` rows each, so the refreshes committing beside a sweep wait for one small write at
    /// a time; how many of each went.
    func sweep(_ cutoffs: SweepCutoffs, batch: Int) async throws -> SweepCounts
    /// The number of stored sessions and refresh tokens.
    func rowCounts() async throws -> (sessions: Int, refreshTokens: Int)
    /// The page of the audit log `request` asks for.
    func auditEvents(_ request: ListAuditRequest) async throws -> ListAuditResponse
    /// Deletes the audit events before `cutoff`, at most `batch` a transaction; how many went.
    @discardableResult
    func pruneAudit(before cutoff: Date, batch: Int) async throws -> Int
}

extension TokenStorage {
    /// The sweep at `now` (`SweepCutoffs`), in batches of `batch` rows.
    public func sweep(now: Date, retention: TimeInterval, idleTimeout: TimeInterval, batch: Int = 1000) async throws -> SweepCounts {
        try await sweep(SweepCutoffs(now: now, retention: retention, idleTimeout: idleTimeout), batch: batch)
    }
    /// `pruneAudit` in batches of 5,000.
    @discardableResult
    public func pruneAudit(before cutoff: Date) async throws -> Int {
        try await pruneAudit(before: cutoff, batch: 5000)
    }
}
