import Foundation
import Mail
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
import GRDB
import IdentityCore

/// One-time codes mailed for an address (issue 19 §3–§4): verifying the user's address,
/// confirming a change to a new address, and reverting a confirmed change from the old one.
/// As for reset codes, only each code's SHA-256 is stored.
extension SQLiteUserStore {
    /// Migration 0007: `email_actions` (its columns as named since 0015). `email`/`email_normalized`
    /// is the address the code is about (verified, changed to, or restored);
    /// `from_email_normalized` the user's address when the code was made (a change or revert
    /// applies only while it is still current); `previous_verified` the old address's verified
    /// state (revert). `used_at` is set when the code is used or voided; rows go with their user.
    static func registerEmailActionsMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0007-email-actions") { db in
            try db.execute(sql: """
                CREATE TABLE email_actions (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    purpose TEXT NOT NULL CHECK (purpose IN ('verify_email', 'change_email', 'revert_email')),
                    userId TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    codeHash BLOB NOT NULL UNIQUE CHECK (length(codeHash) = 32),
                    email TEXT NOT NULL,
                    emailNormalized TEXT NOT NULL,
                    fromEmailNormalized TEXT,
                    previousVerified INTEGER NOT NULL DEFAULT 0,
                    expiresAt INTEGER NOT NULL,
                    usedAt INTEGER,
                    createdAt INTEGER NOT NULL
                ) STRICT;
                CREATE INDEX email_actions_user ON email_actions(userId, purpose, createdAt);
                """)
        }
    }

    /// Migration 0008: an address named by an unused `revert_email` code stays its user's: no
    /// other user can take it (sign-up, upgrade, an email change, an operator's write) until the
    /// code is used, voided or purged (a day after it expired). Without it, whoever took over an
    /// account and moved it to their own address could register the old address at once, and the
    /// owner's revert would fail with `email_exists`. The triggers raise `email_reserved`, which
    /// `translate` turns into `emailExists`.
    static func registerEmailReservationMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0008-email-reservations") { db in
            let reserved = """
                NEW.emailNormalized IS NOT NULL AND EXISTS (
                    SELECT 1 FROM email_actions WHERE purpose = 'revert_email' AND usedAt IS NULL
                    AND emailNormalized = NEW.emailNormalized AND userId <> NEW.id)
                """
            try db.execute(sql: """
                CREATE INDEX email_actions_reserved ON email_actions(emailNormalized) WHERE purpose = 'revert_email' AND usedAt IS NULL;
                CREATE TRIGGER users_email_reserved_insert BEFORE INSERT ON users WHEN \(reserved)
                BEGIN SELECT RAISE(ABORT, 'email_reserved: users.emailNormalized'); END;
                CREATE TRIGGER users_email_reserved_update BEFORE UPDATE OF emailNormalized ON users
                WHEN NEW.emailNormalized IS NOT OLD.emailNormalized AND \(reserved)
                BEGIN SELECT RAISE(ABORT, 'email_reserved: users.emailNormalized'); END;
                """)
        }
    }

    /// Whether `normalized` is another user's address, or reserved for another user by an unused
    /// revert code (in the caller's transaction).
    static func emailTakenOrReserved(_ normalized: String, userID: UserID, in db: Database) throws -> Bool {
        try Row.fetchOne(
            db, sql: """
                SELECT 1 FROM users WHERE email_normalized = ?1 AND id <> ?2
                UNION ALL SELECT 1 FROM email_actions WHERE purpose = 'revert_email' AND used_at IS NULL
                AND email_normalized = ?1 AND user_id <> ?2 LIMIT 1
                """, arguments: [normalized, userID.rawValue]) != nil
    }

    /// Deletes the one-time codes (password reset and email action rows) that expired or were
    /// used before `cutoff`, in one transaction (the outbox worker's hourly purge); returns how many.
    @discardableResult
    public func purgeCodes(before cutoff: Date) async throws -> Int {
        try await run { db in
            try Self.purgeCodes(in: "password_resets", before: cutoff, db) + Self.purgeCodes(in: "email_actions", before: cutoff, db)
        }
    }

    /// Deletes the rows of `table` (`password_resets` or `email_actions`: a fixed name, never
    /// input) that expired or were used before `cutoff`; how many.
    static func purgeCodes(in table: StaticString, before cutoff: Date, _ db: Database) throws -> Int {
        try db.execute(
            sql: "DELETE FROM \(table) WHERE expires_at < ?1 OR (used_at IS NOT NULL AND used_at < ?1)",
            arguments: [cutoff.millisecondsSince1970])
        return db.changesCount
    }

    /// Voids every unused code of `userID` with one of `purposes` (in the caller's transaction).
    static func voidEmailActions(userID: String, purposes: [EmailActionPurpose], at nowMs: Int64, in db: Database) throws {
        for purpose in purposes {
            try db.execute(
                sql: "UPDATE email_actions SET used_at = ? WHERE user_id = ? AND purpose = ? AND used_at IS NULL",
                arguments: [nowMs, userID, purpose.rawValue])
        }
    }
}
