import Foundation
import GRDB
import SQLiteSupport
import TokenPorts

/// Reading a whole `token.sqlite` to copy it into another store (`gatehouse store copy`).
extension SQLiteTokenStore {
    /// A `token.sqlite` opened read-only, every migration applied, read in batches.
    public final class CopySource: TokenCopySource {
        let queue: DatabaseQueue

        /// Opens the file at `path` read-only; throws when it is missing or not fully migrated
        /// (start and stop the token service of this version once first).
        public init(path: String) throws {
            queue = try SQLiteFiles.openCopySource(path, service: "token", migrator: SQLiteTokenStore.migrator, makeError: TokenCopyError.init)
        }

        /// The rows of each kind.
        public func counts() throws -> TokenCopyCounts {
            try queue.read { db in
                TokenCopyCounts(
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
        public func keys() throws -> [StoredSigningKey] {
            try queue.read { db in
                try Row.fetchAll(db, sql: "SELECT * FROM signingKey ORDER BY created_at, rowid").map { row in
                    StoredSigningKey(
                        kid: row["kid"], algorithm: row["algorithm"], privateKey: row["private_key"], encrypted: row["encrypted"],
                        createdAt: SQLiteTokenStore.date(row["created_at"])!, activatesAt: SQLiteTokenStore.date(row["activates_at"]),
                        signingUntil: SQLiteTokenStore.date(row["signing_until"]), retireAfter: SQLiteTokenStore.date(row["retire_after"]))
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
                    return CopiedSession(row: SQLiteTokenStore.session(row), currentHash: row["current_hash"], rotatedAt: SQLiteTokenStore.date(row["rotated_at"]))
                }
                return (rows, last)
            }
        }

        /// Up to `limit` refresh tokens with a hash after `after` (nil: from the first), in hash order.
        public func refreshTokens(after: Data?, limit: Int) throws -> [CopiedRefreshToken] {
            try queue.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT hash, session_id, created_at FROM refreshToken WHERE hash > ? ORDER BY hash LIMIT ?",
                    arguments: [after ?? Data(), limit]
                ).map { CopiedRefreshToken(hash: $0["hash"], sessionID: $0["session_id"], createdAt: SQLiteTokenStore.date($0["created_at"])!) }
            }
        }

        /// Up to `limit` audit events after position `after`, in order.
        public func auditRows(after: Int64, limit: Int) throws -> [CopiedAuditRow] {
            try queue.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT seq, occurred_at, kind, user_id, actor, reason, email, ip, user_agent, session_id, detail
                        FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?
                        """, arguments: [after, limit]
                ).map { row in
                    CopiedAuditRow(
                        seq: row["seq"], occurredAt: row["occurred_at"],
                        text: ["kind", "user_id", "actor", "reason", "email", "ip", "user_agent", "session_id", "detail"].map { row[$0] })
                }
            }
        }

        /// Up to `count` refresh-token hashes picked at random among those whose session is still
        /// stored (the sweep keeps tokens longer than ended sessions), with their sessions' ids.
        public func sample(_ count: Int) throws -> [(hash: Data, sessionID: String)] {
            try queue.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT r.hash, r.session_id FROM refreshToken r JOIN session s ON s.id = r.session_id ORDER BY random() LIMIT ?",
                    arguments: [count]
                ).map { ($0["hash"], $0["session_id"]) }
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

}
