import Foundation
import GRDB
import SQLiteSupport

/// Reading a whole `token.sqlite` to copy it into another store (`gatehouse store copy`).
extension TokenStore {
    /// A session with the columns a copy keeps besides `SessionRow`'s.
    public struct CopiedSession: Sendable {
        /// The session.
        public var row: SessionRow
        /// Its current refresh token's hash.
        public var currentHash: Data?
        /// When it last rotated.
        public var rotatedAt: Date?
    }

    /// A refresh token as stored (by hash).
    public struct CopiedRefreshToken: Sendable {
        /// SHA-256 of the token.
        public var hash: Data
        /// Its session.
        public var sessionID: String
        /// When it was made.
        public var createdAt: Date
    }

    /// An audit event as stored, its position kept.
    public struct CopiedAuditRow: Sendable {
        /// Its position in the log.
        public var seq: Int64
        /// When it happened (milliseconds since 1970).
        public var occurredAt: Int64
        /// `kind`, `userId`, `actor`, `reason`, `email`, `ip`, `userAgent`, `sessionId`, `detail`.
        public var text: [String]
    }

    /// What a copy must match: the number of rows of each kind.
    public struct CopyCounts: Sendable, Equatable, CustomStringConvertible {
        /// Signing keys.
        public var keys = 0
        /// Sessions.
        public var sessions = 0
        /// Refresh tokens.
        public var refreshTokens = 0
        /// Audit events.
        public var auditEvents = 0
        /// Rows of `meta` (the refresh-successor secret).
        public var secrets = 0

        /// Counts.
        public init(keys: Int = 0, sessions: Int = 0, refreshTokens: Int = 0, auditEvents: Int = 0, secrets: Int = 0) {
            self.keys = keys
            self.sessions = sessions
            self.refreshTokens = refreshTokens
            self.auditEvents = auditEvents
            self.secrets = secrets
        }

        /// `N keys, N sessions, …`.
        public var description: String {
            "\(keys) signing keys, \(sessions) sessions, \(refreshTokens) refresh tokens, \(auditEvents) audit events, \(secrets) secrets"
        }
    }

    /// A `token.sqlite` opened read-only, every migration applied, read in batches.
    public final class CopySource: Sendable {
        let queue: DatabaseQueue

        /// Opens the file at `path` read-only; throws when it is missing or not fully migrated
        /// (start and stop the token service of this version once first).
        public init(path: String) throws {
            queue = try SQLiteFiles.openCopySource(path, service: "token", migrator: TokenStore.migrator, makeError: CopyError.init)
        }

        /// The rows of each kind.
        public func counts() throws -> CopyCounts {
            try queue.read { db in
                CopyCounts(
                    keys: try Int.fetchOne(db, sql: "SELECT count(*) FROM signingKey") ?? 0,
                    sessions: try Int.fetchOne(db, sql: "SELECT count(*) FROM session") ?? 0,
                    refreshTokens: try Int.fetchOne(db, sql: "SELECT count(*) FROM refreshToken") ?? 0,
                    auditEvents: try Int.fetchOne(db, sql: "SELECT count(*) FROM audit_log") ?? 0,
                    secrets: try Int.fetchOne(db, sql: "SELECT count(*) FROM meta") ?? 0)
            }
        }

        /// The stored secrets, as stored (sealed ones stay sealed).
        public func secrets() throws -> [(name: String, value: Data)] {
            try queue.read { db in
                try Row.fetchAll(db, sql: "SELECT name, value FROM meta ORDER BY name").map { ($0["name"], $0["value"]) }
            }
        }

        /// Every signing key, oldest first.
        public func keys() throws -> [StoredKey] {
            try queue.read { db in
                try Row.fetchAll(db, sql: "SELECT * FROM signingKey ORDER BY createdAt, rowid").map { row in
                    StoredKey(
                        kid: row["kid"], algorithm: row["algorithm"], privateKey: row["privateKey"], encrypted: row["encrypted"],
                        createdAt: TokenStore.date(row["createdAt"])!, activatesAt: TokenStore.date(row["activatesAt"]),
                        signingUntil: TokenStore.date(row["signingUntil"]), retireAfter: TokenStore.date(row["retireAfter"]))
                }
            }
        }

        /// Up to `limit` sessions after rowid `after`, in rowid order (insertion order), with the
        /// last rowid read (pass it back for the next batch).
        public func sessions(after: Int64, limit: Int) throws -> (rows: [CopiedSession], last: Int64) {
            try queue.read { db in
                var last = after
                let rows = try Row.fetchAll(
                    db, sql: "SELECT rowid AS r, * FROM session WHERE rowid > ? ORDER BY rowid LIMIT ?", arguments: [after, limit]
                ).map { row -> CopiedSession in
                    last = row["r"]
                    return CopiedSession(row: TokenStore.session(row), currentHash: row["currentHash"], rotatedAt: TokenStore.date(row["rotatedAt"]))
                }
                return (rows, last)
            }
        }

        /// Up to `limit` refresh tokens with a hash after `after` (nil: from the first), in hash order.
        public func refreshTokens(after: Data?, limit: Int) throws -> [CopiedRefreshToken] {
            try queue.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT hash, sessionId, createdAt FROM refreshToken WHERE hash > ? ORDER BY hash LIMIT ?",
                    arguments: [after ?? Data(), limit]
                ).map { CopiedRefreshToken(hash: $0["hash"], sessionID: $0["sessionId"], createdAt: TokenStore.date($0["createdAt"])!) }
            }
        }

        /// Up to `limit` audit events after position `after`, in order.
        public func auditRows(after: Int64, limit: Int) throws -> [CopiedAuditRow] {
            try queue.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT seq, occurredAt, kind, userId, actor, reason, email, ip, userAgent, sessionId, detail
                        FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?
                        """, arguments: [after, limit]
                ).map { row in
                    CopiedAuditRow(
                        seq: row["seq"], occurredAt: row["occurredAt"],
                        text: ["kind", "userId", "actor", "reason", "email", "ip", "userAgent", "sessionId", "detail"].map { row[$0] })
                }
            }
        }

        /// Up to `count` refresh-token hashes picked at random among those whose session is still
        /// stored (the sweep keeps tokens longer than ended sessions), with their sessions' ids.
        public func sample(_ count: Int) throws -> [(hash: Data, sessionID: String)] {
            try queue.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT r.hash, r.sessionId FROM refreshToken r JOIN session s ON s.id = r.sessionId ORDER BY random() LIMIT ?",
                    arguments: [count]
                ).map { ($0["hash"], $0["sessionId"]) }
            }
        }

        /// The last audit position ever given: the log's AUTOINCREMENT mark, which the prune does
        /// not lower (positions are never reused), or its last row.
        public func auditHighWater() throws -> Int64 {
            try queue.read { db in
                let mark = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'") ?? 0
                return max(mark, try Int64.fetchOne(db, sql: "SELECT max(seq) FROM audit_log") ?? 0)
            }
        }
    }

    /// Why a copy cannot start or did not match.
    public struct CopyError: Error, CustomStringConvertible {
        /// What to do about it.
        public let description: String
        /// An error saying `description`.
        public init(_ description: String) { self.description = description }
    }
}
