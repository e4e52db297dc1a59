import Foundation
import GRDB
import SQLiteSupport

// One naming scheme for both stores: the token database's columns have the PostgreSQL store's
// names (`PostgresTokenStore`'s `token_` tables), in snake case, since migration 0006. The
// migrations before it are history and keep the camelCase names of their time; SQLite's RENAME
// COLUMN rewrites every index that names a renamed column. Table names stay as they are.
extension SQLiteTokenStore {
    /// Every camelCase column migrations 0001–0005 made, by table, and its name since: the column
    /// of the same meaning in the PostgreSQL table (`token_signing_key`, `token_session`,
    /// `token_refresh_token`, `token_audit_log`). Migration 0006 runs it: frozen.
    static let snakeCaseRenames0006: [(table: String, columns: [(old: String, new: String)])] = [
        ("signingKey", [
            ("privateKey", "private_key"), ("createdAt", "created_at"), ("signingUntil", "signing_until"),
            ("retireAfter", "retire_after"), ("activatesAt", "activates_at"),
        ]),
        ("session", [
            ("userId", "user_id"), ("createdAt", "created_at"), ("authTime", "auth_time"), ("userAgent", "user_agent"),
            ("lastUsedAt", "last_used_at"), ("expiresAt", "expires_at"), ("revokedAt", "revoked_at"), ("revokeReason", "revoke_reason"),
            ("currentHash", "current_hash"), ("rotatedAt", "rotated_at"),
        ]),
        ("refreshToken", [("sessionId", "session_id"), ("createdAt", "created_at")]),
        ("audit_log", AuditLogTable.columnRenames),
    ]

    /// Migration 0006: every column of `snakeCaseRenames0006` renamed in place (no row is
    /// rewritten; SQLite rewrites the indexes that name them).
    static func registerSnakeCaseColumnsMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0006-snake-case-columns") { db in
            for (table, columns) in snakeCaseRenames0006 {
                for (old, new) in columns {
                    try db.execute(sql: "ALTER TABLE \(table) RENAME COLUMN \(old) TO \(new)")
                }
            }
        }
    }
}
