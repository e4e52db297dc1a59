import Foundation
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
import GRDB
import IdentityCore
import Mail

/// Password reset codes (issue 19 §2): only each code's SHA-256 is stored. A new code, the
/// voiding of the user's older ones and its mail (outbox) are written in one transaction.
extension SQLiteUserStore {
    /// Migration 0006: `password_resets`. `used_at` (so named since 0015) is set when a code is used or voided by a
    /// newer one; rows go with their user (`ON DELETE CASCADE`).
    static func registerPasswordResetMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0006-password-resets") { db in
            try db.execute(sql: """
                CREATE TABLE password_resets (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    userId TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    codeHash BLOB NOT NULL UNIQUE CHECK (length(codeHash) = 32),
                    expiresAt INTEGER NOT NULL,
                    usedAt INTEGER,
                    createdAt INTEGER NOT NULL
                ) STRICT;
                CREATE INDEX password_resets_userId ON password_resets(userId, createdAt);
                """)
        }
    }

    /// In one transaction: reads the user, and its reset codes of the last hour, and applies
    /// `MailCodeRules.requestPasswordReset`: `noAccount` unless `userID` still exists, is enabled
    /// and has the normalized email `email`; `limited` past `perMinute` or `perHour` codes made in
    /// the last minute or hour; otherwise the user's unused codes voided, `codeHash` (expiring at
    /// `expiresAt`) stored and `mail` queued in the outbox. Rows older than a day are purged
    /// (unless `noAccount`).
    public func storePasswordReset(
        userID: UserID, email: String, codeHash: Data, expiresAt: Date, mail: MailMessage, now: Date, perMinute: Int, perHour: Int
    ) async throws -> PasswordResetOutcome {
        try await run { db in
            let user = try Self.mailCodeUser(userID, in: db)
            let recent = try Self.recentResetTimes(userID, now: now, in: db)
            let decision = MailCodeRules.requestPasswordReset(
                user: user, email: email, recentCodes: recent,
                code: NewResetCode(codeHash: codeHash, expiresAt: expiresAt), mail: mail, now: now, perMinute: perMinute, perHour: perHour)
            if let writes = decision.writes { try Self.apply(writes, at: now, in: db) }
            return decision.outcome
        }
    }

    /// The user of an unused, unexpired code (by its hash) and that user's normalized email.
    public func passwordResetUser(codeHash: Data, now: Date) async throws -> (UserID, String?)? {
        try await read { db in
            guard let row = try Row.fetchOne(
                db, sql: """
                    SELECT u.id, u.email_normalized FROM password_resets r JOIN users u ON u.id = r.user_id
                    WHERE r.code_hash = ? AND r.used_at IS NULL AND r.expires_at > ?
                    """, arguments: [codeHash, now.millisecondsSince1970])
            else { return nil }
            return (UserID(row[0] as String), row[1] as String?)
        }
    }

    /// In one transaction: reads the code and the user and applies `MailCodeRules.usePasswordReset`:
    /// the code used, every other unused code of the user voided, the user's pending email
    /// changes voided (a change asked from a session the reset is ending must not complete after
    /// it), and the user's password hash set (version + 1). The address is marked verified: the
    /// code was mailed to it (an email change voids older codes), so using it proves the mailbox.
    /// `invalidResetCode` when the code no longer qualifies (used meanwhile, expired, another
    /// user's) or the user is gone or disabled (a disabled user gets no new password this way).
    public func usePasswordReset(codeHash: Data, userID: UserID, passwordHash: String, now: Date) async throws {
        try await run { db in
            let code = try Self.storedResetCode(codeHash, in: db)
            let user = try Self.mailCodeUser(userID, in: db)
            let writes: MailCodeWrites<MailMessage> = try MailCodeRules.usePasswordReset(
                code: code, userID: userID, user: user, passwordHash: passwordHash, now: now)
            try Self.apply(writes, at: now, in: db)
        }
    }

    /// Deletes the reset rows that expired or were used before `cutoff` (the outbox worker's
    /// hourly purge); returns how many.
    @discardableResult
    public func purgePasswordResets(before cutoff: Date) async throws -> Int {
        try await run { db in try Self.purgeCodes(in: "password_resets", before: cutoff, db) }
    }

    /// Voids every unused reset code and every pending email change of `userID` (its password
    /// changed: a code mailed before must not outlive the credentials it was sent for, and a
    /// change asked from a session the change ends must not complete after it).
    public func voidPasswordResets(userID: UserID, at now: Date) async throws {
        try await run { db in try Self.apply(MailCodeRules.passwordChanged(userID: userID), at: now, in: db) }
    }

}
