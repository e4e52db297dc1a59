import Foundation
import GRDB

/// One-time codes mailed for an address (issue 19 §3–§4): verifying the user's address,
/// confirming a change to a new address, and reverting a confirmed change from the old one.
/// As for reset codes, only each code's SHA-256 is stored.
extension SQLiteUserStore {
    /// What an `email_actions` row's code does.
    public enum EmailActionPurpose: String, Sendable, CaseIterable {
        /// Verifies `email` if it is still the user's address.
        case verifyEmail = "verify_email"
        /// Makes `email` the user's address (if the address is still `fromEmailNormalized`).
        case changeEmail = "change_email"
        /// Restores `email` (the old address; `previousVerified` its verified state) and revokes
        /// every session of the user.
        case revertEmail = "revert_email"
    }

    /// Migration 0007: `email_actions`. `email`/`emailNormalized` is the address the code is
    /// about (verified, changed to, or restored); `fromEmailNormalized` the user's address when
    /// the code was made (a change or revert applies only while it is still current);
    /// `previousVerified` the old address's verified state (revert). `usedAt` is set when the
    /// code is used or voided; rows go with their user.
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

    /// Deletes the email action rows that expired or were used before `cutoff` (the outbox
    /// worker's hourly purge, with the reset codes); returns how many.
    @discardableResult
    public func purgeEmailActions(before cutoff: Date) async throws -> Int {
        try await run { db in
            try db.execute(
                sql: "DELETE FROM email_actions WHERE expiresAt < ?1 OR (usedAt IS NOT NULL AND usedAt < ?1)",
                arguments: [cutoff.millisecondsSince1970])
            return db.changesCount
        }
    }

    /// Voids every unused code of `userID` with one of `purposes` (in the caller's transaction).
    static func voidEmailActions(userID: String, purposes: [EmailActionPurpose], at nowMs: Int64, in db: Database) throws {
        for purpose in purposes {
            try db.execute(
                sql: "UPDATE email_actions SET usedAt = ? WHERE userId = ? AND purpose = ? AND usedAt IS NULL",
                arguments: [nowMs, userID, purpose.rawValue])
        }
    }
}
