import Foundation
import GatehouseSupport
import GRDB
import TokenPorts
import GatehouseContracts
import Logging
import SQLiteSupport
import TokenCore

/// The token service's SQLite file: signing keys, sessions and refresh tokens.
///
/// WAL mode with `synchronous=NORMAL` by default: an acknowledged write survives a crash of the
/// process (`kill -9`); `synchronous=FULL` (`.powerLoss`) also survives power loss. Writes are
/// group-committed (`GroupCommit`): concurrent rotations share one transaction and one WAL
/// append (one fsync with `FULL`), each still answered only after that commit. GRDB runs
/// every statement on its own writer/reader queues, never on Swift's cooperative pool. No
/// SQLite error leaves this type: they become `internal`/`unavailable` `RPCError`s.
public final class SQLiteTokenStore: TokenStorage {
    /// How far an acknowledged write survives.
    public typealias Durability = SQLiteSupport.Durability

    let files: SQLiteFiles
    var pool: DatabasePool { files.pool }
    /// Checkpoints the WAL off the writer's path (see `WALCheckpointer`).
    var checkpointer: WALCheckpointer { files.checkpointer }
    /// Connections of its own for the refresh-token look-up (see `RawReadPool`), reading with
    /// `pread` by default (see `TokenConfiguration.pointReadMemoryMap`).
    var pointReads: RawReadPool { files.pointReads }
    let commits: GroupCommit
    let logger: Logger

    /// Opens (creating if needed) the database at `path`. Does not migrate: call `migrate()`.
    public init(
        path: String, durability: Durability = .processCrash, pointReadMemoryMap: Int = 0,
        logger: Logger = Logger(label: "gatehouse.token.store")
    ) throws {
        do {
            files = try SQLiteFiles(
                path: path, label: "token", durability: durability, pointReadMemoryMap: pointReadMemoryMap
            ) { ThreadName.set("wal-checkpoint") }
        } catch {
            throw RPCError(.internal, "cannot open the token database at \(path): \(error)")
        }
        commits = GroupCommit(writer: files.pool)
        self.logger = logger
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("0001-keys-sessions-refresh-tokens") { db in
            try db.execute(sql: """
                CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL) STRICT;
                CREATE TABLE signingKey (
                    kid TEXT PRIMARY KEY NOT NULL,
                    algorithm TEXT NOT NULL CHECK (algorithm IN ('ES256', 'EdDSA', 'RS256')),
                    privateKey BLOB NOT NULL,
                    encrypted INTEGER NOT NULL CHECK (encrypted IN (0, 1)),
                    createdAt INTEGER NOT NULL,
                    signingUntil INTEGER,
                    retireAfter INTEGER
                ) STRICT;
                CREATE TABLE session (
                    id TEXT PRIMARY KEY NOT NULL,
                    userId TEXT NOT NULL,
                    createdAt INTEGER NOT NULL,
                    authTime INTEGER NOT NULL,
                    amr TEXT NOT NULL,
                    userAgent TEXT NOT NULL,
                    ip TEXT NOT NULL,
                    lastUsedAt INTEGER NOT NULL,
                    expiresAt INTEGER NOT NULL,
                    revokedAt INTEGER,
                    revokeReason TEXT NOT NULL DEFAULT ''
                ) STRICT;
                CREATE INDEX session_userId ON session(userId);
                CREATE TABLE refreshToken (
                    hash BLOB PRIMARY KEY NOT NULL CHECK (length(hash) = 32),
                    sessionId TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
                    createdAt INTEGER NOT NULL,
                    usedAt INTEGER,
                    successorHash BLOB
                ) STRICT;
                CREATE INDEX refreshToken_sessionId ON refreshToken(sessionId);
                """)
        }
        // Fewer pages written per rotation (each one also copied back by a checkpoint): the
        // session row names its current token, so rotating updates the session and inserts the
        // successor, and the presented token's row is left alone (it used to get `usedAt` and
        // `successorHash`). Tokens are keyed by hash alone (WITHOUT ROWID: one b-tree instead of
        // a table and its primary-key index). The sessionId index and foreign key go too: a
        // token whose session is gone is invalid anyway, and the sweep (`sweep`) deletes old
        // tokens through the createdAt index, whose inserts all land on its last page.
        // Which token a session is on, and when it rotated, carry over: the token of each
        // session that was not used yet, and the latest `usedAt`.
        migrator.registerMigration("0002-current-token-on-session") { db in
            try db.execute(sql: """
                CREATE TABLE refreshTokenV2 (
                    hash BLOB PRIMARY KEY NOT NULL CHECK (length(hash) = 32),
                    sessionId TEXT NOT NULL,
                    createdAt INTEGER NOT NULL
                ) STRICT, WITHOUT ROWID;
                INSERT INTO refreshTokenV2 (hash, sessionId, createdAt) SELECT hash, sessionId, createdAt FROM refreshToken;
                ALTER TABLE session ADD COLUMN currentHash BLOB CHECK (currentHash IS NULL OR length(currentHash) = 32);
                ALTER TABLE session ADD COLUMN rotatedAt INTEGER;
                UPDATE session SET
                    currentHash = (SELECT r.hash FROM refreshToken r WHERE r.sessionId = session.id AND r.usedAt IS NULL
                                   ORDER BY r.createdAt DESC LIMIT 1),
                    rotatedAt = (SELECT max(r.usedAt) FROM refreshToken r WHERE r.sessionId = session.id);
                DROP TABLE refreshToken;
                ALTER TABLE refreshTokenV2 RENAME TO refreshToken;
                CREATE INDEX refreshToken_createdAt ON refreshToken(createdAt);
                """)
        }
        registerRevokedAtIndex(&migrator)
        registerAuditMigration(&migrator)
        // A key may be published before it signs (a rotation coordinated across instances, see
        // `TokenService.rotateKeys`): it signs from `activatesAt`. Older keys signed from creation.
        migrator.registerMigration("0005-key-activation") { db in
            try db.execute(sql: "ALTER TABLE signingKey ADD COLUMN activatesAt INTEGER")
        }
        registerSnakeCaseColumnsMigration(&migrator)
        return migrator
    }

    /// Applies pending migrations (the explicit start-up step).
    public func migrate() throws {
        do { try files.migrate(Self.migrator) } catch { throw translate(error) }
    }

    func translate(_ error: any Error) -> any Error {
        if error is RPCError || error is TokenError || error is CancellationError { return error }
        if SQLiteFiles.isBusy(error) {
            return RPCError(.unavailable, "the token database is busy")
        }
        logger.error("token store: \(String(reflecting: error))")
        return RPCError(.internal, "internal error")
    }

    /// Every write goes through group commit: concurrent writes share one transaction (each in
    /// its own savepoint) and are acknowledged after its commit.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await commits.write(body) } catch { throw translate(error) }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await pool.read(body) } catch { throw translate(error) }
    }

    // MARK: Capabilities

    /// One instance numbers its own revocations: no shared log.
    public var sharedRevocationLog: (any SharedRevocationLog)? { nil }

    /// The only instance on its file: it always leads, so `body` runs at once.
    public func runIfLeader(_ job: String, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        try await body()
        return true
    }

    // MARK: Sessions

    /// Stores a new session with its first refresh token (by hash).
    public func createSession(_ s: StoredSession, refreshHash: Data) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO session (id, user_id, created_at, auth_time, amr, user_agent, ip, last_used_at, expires_at, current_hash)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    s.id, s.userID, Self.ms(s.createdAt), Self.ms(s.authTime), s.amr.joined(separator: " "),
                    s.client.userAgent, s.client.ip, Self.ms(s.lastUsedAt), Self.ms(s.expiresAt), refreshHash,
                ])
            try db.execute(
                sql: "INSERT INTO refreshToken (hash, session_id, created_at) VALUES (?, ?, ?)",
                arguments: [refreshHash, s.id, Self.ms(s.createdAt)])
        }
    }

    /// The session a refresh token belongs to (whatever the token's state).
    ///
    /// Read on the calling thread on a connection of `pointReads`, not through GRDB's async hop:
    /// one primary-key lookup on a WAL reader (never waits for the writer) costs less than the
    /// two thread wake-ups of the hop. The token service's handlers run on the RPC server's own
    /// I/O thread, never on Swift's cooperative pool, so this blocks no shared thread.
    public func session(forRefreshHash hash: Data) throws -> StoredSession? {
        do {
            return try pointReads.read(sql: Self.sessionByRefreshHashSQL, arguments: [.blob(Array(hash))]) { row in
                Self.session(row, from: 0)
            }
        } catch { throw translate(error) }
    }

    /// The session columns in the order `session(_:from:)` reads them.
    static let sessionColumns = "s.id, s.user_id, s.created_at, s.auth_time, s.amr, s.user_agent, s.ip, s.last_used_at, s.expires_at, s.revoked_at, s.revoke_reason"
    // Raw queries (see `RawStatement`): their own SQL texts, never run through GRDB's arguments.
    static let sessionByRefreshHashSQL =
        "/* raw */ SELECT \(sessionColumns) FROM refreshToken r JOIN session s ON s.id = r.session_id WHERE r.hash = ?"
    static let tokenAndSessionSQL =
        "/* raw */ SELECT s.current_hash, s.rotated_at, \(sessionColumns) FROM refreshToken r JOIN session s ON s.id = r.session_id WHERE r.hash = ?"

    /// A session from `sessionColumns`, starting at column `first`.
    static func session(_ row: RawRow, from first: Int32) -> StoredSession {
        StoredSession(
            id: row.string(first), userID: row.string(first + 1), createdAt: date(row.int64(first + 2))!,
            authTime: date(row.int64(first + 3))!, amr: row.string(first + 4).split(separator: " ").map(String.init),
            client: ClientInfo(userAgent: row.string(first + 5), ip: row.string(first + 6)),
            lastUsedAt: date(row.int64(first + 7))!, expiresAt: date(row.int64(first + 8))!,
            revokedAt: date(row.optionalInt64(first + 9)), revokeReason: row.string(first + 10))
    }

    /// The session with this id, or nil.
    public func session(id: String) async throws -> StoredSession? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM session WHERE id = ?"), arguments: [id]).map(Self.session)
        }
    }

    /// The user's sessions, oldest first.
    public func sessions(userID: String) async throws -> [StoredSession] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM session WHERE user_id = ? ORDER BY created_at", arguments: [userID]).map(Self.session)
        }
    }

    /// Rotates the refresh token `hash` to `successorHash` in one write transaction, so two
    /// concurrent refreshes of one token cannot both mint different successors: the second
    /// finds the session already on the successor and, inside the grace window, gets it too.
    ///
    /// The session row holds its current token (`current_hash`) and when it last rotated. The
    /// presented token is the current one: rotate. It is the one just before (its successor is
    /// current) and the rotation is at most `grace` old: a replay, answered with the same
    /// successor. Any other token of the session: reuse, and the session is revoked.
    public func rotate(hash: Data, successorHash: Data, now: Date, grace: TimeInterval, idleTimeout: TimeInterval) async throws -> RotationOutcome {
        try await write { db in
            // The token's session, read straight from SQLite, in one indexed look-up.
            guard let (current, rotatedAt, found) = try RawStatement.read(
                db, sql: Self.tokenAndSessionSQL, arguments: [.blob(Array(hash))], { row in
                    (row.isNull(0) ? nil : Data(row.bytes(0)), Self.date(row.optionalInt64(1)), Self.session(row, from: 2))
                })
            else { return .invalid }
            var session = found
            let sessionID = session.id
            let state = RefreshRotation.State(
                revoked: session.revokedAt != nil, expiresAt: session.expiresAt, lastUsedAt: session.lastUsedAt,
                currentHash: current, rotatedAt: rotatedAt)
            switch RefreshRotation.decide(state, presented: hash, successor: successorHash, now: now, grace: grace, idleTimeout: idleTimeout) {
            case .revoked: return .revoked(session)
            case .expired: return .expired(session)
            case .graceReplay: return .graceReplay(session)
            case .reuse:
                let reason = RefreshRotation.reuseReason
                try db.execute(sql: "UPDATE session SET revoked_at = ?, revoke_reason = ? WHERE id = ?", arguments: [Self.ms(now), reason, sessionID])
                session.revokedAt = now
                session.revokeReason = reason
                if let event = RevocationAudit.event([session], reason: reason, at: now, all: false) {
                    try Self.appendAudit(event, in: db)
                }
                return .reused(session)
            case .rotate:
                break
            }
            try db.cachedStatement(sql: "UPDATE session SET current_hash = ?, rotated_at = ?, last_used_at = ? WHERE id = ?")
                .execute(arguments: [successorHash, Self.ms(now), Self.ms(now), sessionID])
            try db.cachedStatement(sql: "INSERT INTO refreshToken (hash, session_id, created_at) VALUES (?, ?, ?)")
                .execute(arguments: [successorHash, sessionID, Self.ms(now)])
            session.lastUsedAt = now
            return .rotated(session)
        }
    }

    /// The session's current refresh-token hash (for tests).
    public func currentHash(sessionID: String) async throws -> Data? {
        try await read { db in try Data.fetchOne(db, sql: "SELECT current_hash FROM session WHERE id = ?", arguments: [sessionID]) }
    }

    /// Revokes one session; returns it if it was active.
    public func revoke(sessionID: String, reason: String, at now: Date) async throws -> StoredSession? {
        try await write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM session WHERE id = ? AND revoked_at IS NULL", arguments: [sessionID])
            else { return nil }
            try db.execute(sql: "UPDATE session SET revoked_at = ?, revoke_reason = ? WHERE id = ?", arguments: [Self.ms(now), reason, sessionID])
            var s = Self.session(row)
            s.revokedAt = now
            s.revokeReason = reason
            if let event = RevocationAudit.event([s], reason: reason, at: now, all: false) { try Self.appendAudit(event, in: db) }
            return s
        }
    }

    /// Whether a session is revoked (or unknown).
    public func isRevoked(sessionID: String) async throws -> Bool {
        try await read { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT revoked_at FROM session WHERE id = ?"), arguments: [sessionID])
            else { return true }
            let revokedAt: Int64? = row["revoked_at"]
            return revokedAt != nil
        }
    }

    // MARK: Rows

    /// Milliseconds since 1970, as stored.
    static func ms(_ date: Date) -> Int64 { date.millisecondsSince1970 }
    /// The stored milliseconds as a date (nil stays nil).
    static func date(_ ms: Int64?) -> Date? { ms.map(Date.init(millisecondsSince1970:)) }

    static func session(_ row: Row) -> StoredSession {
        let amr: String = row["amr"]
        return StoredSession(
            id: row["id"], userID: row["user_id"], createdAt: date(row["created_at"])!, authTime: date(row["auth_time"])!,
            amr: amr.split(separator: " ").map(String.init), client: ClientInfo(userAgent: row["user_agent"], ip: row["ip"]),
            lastUsedAt: date(row["last_used_at"])!, expiresAt: date(row["expires_at"])!, revokedAt: date(row["revoked_at"]),
            revokeReason: row["revoke_reason"])
    }
}
