import Foundation
import GRDB
import SQLiteSupport

// One naming scheme for both stores: the identity database's columns have the PostgreSQL store's
// names (`PostgresUserStore`'s migrations), in snake case, since migration 0015. The migrations
// before it are history and keep the camelCase names of their time; SQLite's RENAME COLUMN
// rewrites every index and trigger that names a renamed column.
extension SQLiteUserStore {
    /// Every camelCase column migrations 0001–0014 made, by table, and its name since: the
    /// PostgreSQL table's column of the same meaning (`user_changes.user` is `user_json` there,
    /// `user` being reserved in PostgreSQL). Migration 0015 runs it: frozen.
    static let snakeCaseRenames0015: [(table: String, columns: [(old: String, new: String)])] = [
        ("users", [
            ("emailNormalized", "email_normalized"), ("emailVerified", "email_verified"), ("displayName", "display_name"),
            ("photoURL", "photo_url"), ("passwordHash", "password_hash"), ("isAnonymous", "is_anonymous"),
            ("customClaims", "custom_claims"), ("createdAt", "created_at"), ("updatedAt", "updated_at"),
            ("lastSignInAt", "last_sign_in_at"), ("tokensValidAfter", "tokens_valid_after"), ("sessionActivityAt", "session_activity_at"),
        ]),
        ("identities", [("userId", "user_id"), ("createdAt", "created_at")]),
        ("outbox", [
            ("messageId", "message_id"), ("nextAttemptAt", "next_attempt_at"), ("createdAt", "created_at"), ("sentAt", "sent_at"),
            ("lastError", "last_error"),
        ]),
        ("password_resets", [("userId", "user_id"), ("codeHash", "code_hash"), ("expiresAt", "expires_at"), ("usedAt", "used_at"), ("createdAt", "created_at")]),
        ("email_actions", [
            ("userId", "user_id"), ("codeHash", "code_hash"), ("emailNormalized", "email_normalized"),
            ("fromEmailNormalized", "from_email_normalized"), ("previousVerified", "previous_verified"), ("expiresAt", "expires_at"),
            ("usedAt", "used_at"), ("createdAt", "created_at"),
        ]),
        ("user_changes", [("userId", "user_id"), ("occurredAt", "occurred_at"), ("user", "user_json")]),
        ("change_log_state", [
            ("prunedThrough", "pruned_through"), ("capPrunedThrough", "cap_pruned_through"), ("capCheckedThrough", "cap_checked_through"),
        ]),
        ("user_changes_pruned", [("userId", "user_id"), ("prunedThrough", "pruned_through")]),
        ("audit_log", AuditLogTable.columnRenames),
        ("admin_keys", [("secretHash", "secret_hash"), ("createdAt", "created_at"), ("revokedAt", "revoked_at"), ("lastUsedAt", "last_used_at")]),
        ("apple_tokens", [("userId", "user_id"), ("clientId", "client_id"), ("sealedToken", "sealed_token"), ("createdAt", "created_at")]),
        ("apple_revocations", [
            ("clientId", "client_id"), ("sealedToken", "sealed_token"), ("associatedData", "associated_data"),
            ("nextAttemptAt", "next_attempt_at"), ("createdAt", "created_at"),
        ]),
    ]

    /// Migration 0015: every column of `snakeCaseRenames0015` renamed in place (no row is
    /// rewritten; SQLite rewrites the indexes and triggers that name them, and checks the whole
    /// schema after each rename). The email reservation's triggers are made again only for their
    /// message, which named the old column (`translate` reads `email_reserved` in it). The JSON
    /// keys the change-log trigger writes stay camelCase: they are the log's format (`LoggedUser`),
    /// not column names.
    static func registerSnakeCaseColumnsMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0015-snake-case-columns") { db in
            for (table, columns) in snakeCaseRenames0015 {
                for (old, new) in columns {
                    try db.execute(sql: "ALTER TABLE \(table) RENAME COLUMN \(old) TO \(new)")
                }
            }
            let reserved = """
                NEW.email_normalized IS NOT NULL AND EXISTS (
                    SELECT 1 FROM email_actions WHERE purpose = 'revert_email' AND used_at IS NULL
                    AND email_normalized = NEW.email_normalized AND user_id <> NEW.id)
                """
            try db.execute(sql: """
                DROP TRIGGER users_email_reserved_insert;
                DROP TRIGGER users_email_reserved_update;
                CREATE TRIGGER users_email_reserved_insert BEFORE INSERT ON users WHEN \(reserved)
                BEGIN SELECT RAISE(ABORT, 'email_reserved: users.email_normalized'); END;
                CREATE TRIGGER users_email_reserved_update BEFORE UPDATE OF email_normalized ON users
                WHEN NEW.email_normalized IS NOT OLD.email_normalized AND \(reserved)
                BEGIN SELECT RAISE(ABORT, 'email_reserved: users.email_normalized'); END;
                """)
        }
    }
}
