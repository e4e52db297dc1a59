import Foundation
import GatehouseSupport
import GRDB
import IdentityCore
import Mail

/// Password reset codes (issue 19 §2): only each code's SHA-256 is stored. A new code, the
/// voiding of the user's older ones and its mail (outbox) are written in one transaction.
extension SQLiteUserStore {
    /// Migration 0006: `password_resets`. `usedAt` is set when a code is used or voided by a
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

    /// In one transaction: checks that `userID` still exists, is enabled and has the normalized
    /// email `email`; checks the per-address limits (`perMinute`, `perHour` codes made in the
    /// last minute and hour); voids the user's unused codes; stores `codeHash` (expiring at
    /// `expiresAt`); queues `mail` in the outbox. Rows older than a day are purged.
    public func storePasswordReset(
        userID: UserID, email: String, codeHash: Data, expiresAt: Date, mail: MailMessage, now: Date, perMinute: Int, perHour: Int
    ) async throws -> PasswordResetOutcome {
        try await run { db in
            let nowMs = now.millisecondsSince1970
            guard let row = try Row.fetchOne(
                db, sql: "SELECT disabled FROM users WHERE id = ? AND emailNormalized = ?", arguments: [userID.rawValue, email]),
                (row[0] as Int64) == 0
            else { return .noAccount }
            try db.execute(
                sql: "DELETE FROM password_resets WHERE userId = ? AND createdAt < ?", arguments: [userID.rawValue, nowMs - 86_400_000])
            let count = { (since: Int64) in
                try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM password_resets WHERE userId = ? AND createdAt > ?",
                    arguments: [userID.rawValue, since]) ?? 0
            }
            if try count(nowMs - 60_000) >= perMinute || count(nowMs - 3_600_000) >= perHour { return .limited }
            try db.execute(
                sql: "UPDATE password_resets SET usedAt = ? WHERE userId = ? AND usedAt IS NULL", arguments: [nowMs, userID.rawValue])
            try db.execute(
                sql: "INSERT INTO password_resets (userId, codeHash, expiresAt, createdAt) VALUES (?, ?, ?, ?)",
                arguments: [userID.rawValue, codeHash, expiresAt.millisecondsSince1970, nowMs])
            try Self.enqueue(mail, in: db, at: now)
            return .queued
        }
    }

    /// The user of an unused, unexpired code (by its hash) and that user's normalized email.
    public func passwordResetUser(codeHash: Data, now: Date) async throws -> (UserID, String?)? {
        try await read { db in
            guard let row = try Row.fetchOne(
                db, sql: """
                    SELECT u.id, u.emailNormalized FROM password_resets r JOIN users u ON u.id = r.userId
                    WHERE r.codeHash = ? AND r.usedAt IS NULL AND r.expiresAt > ?
                    """, arguments: [codeHash, now.millisecondsSince1970])
            else { return nil }
            return (UserID(row[0] as String), row[1] as String?)
        }
    }

    /// In one transaction: marks the code (still unused and unexpired, of `userID`) and every
    /// other unused code of the user used, voids the user's pending email changes (a change asked
    /// from a session the reset is ending must not complete after it), and sets the user's
    /// password hash (version + 1). The address is marked verified: the code was mailed to it
    /// (an email change voids older codes), so using it proves the mailbox.
    /// `invalidResetCode` when the code no longer qualifies (used meanwhile, expired).
    public func usePasswordReset(codeHash: Data, userID: UserID, passwordHash: String, now: Date) async throws {
        try await run { db in
            let nowMs = now.millisecondsSince1970
            try db.execute(
                sql: "UPDATE password_resets SET usedAt = ? WHERE codeHash = ? AND userId = ? AND usedAt IS NULL AND expiresAt > ?",
                arguments: [nowMs, codeHash, userID.rawValue, nowMs])
            guard db.changesCount == 1 else { throw IdentityError.invalidResetCode }
            try db.execute(
                sql: "UPDATE password_resets SET usedAt = ? WHERE userId = ? AND usedAt IS NULL", arguments: [nowMs, userID.rawValue])
            try Self.voidEmailActions(userID: userID.rawValue, purposes: [.changeEmail], at: nowMs, in: db)
            // Only while the user is enabled (a disabled user gets no new password this way).
            try db.execute(
                sql: "UPDATE users SET passwordHash = ?, emailVerified = 1, version = version + 1, updatedAt = ? WHERE id = ? AND disabled = 0",
                arguments: [passwordHash, nowMs, userID.rawValue])
            guard db.changesCount == 1 else { throw IdentityError.invalidResetCode }
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
        try await run { db in
            try db.execute(
                sql: "UPDATE password_resets SET usedAt = ? WHERE userId = ? AND usedAt IS NULL",
                arguments: [now.millisecondsSince1970, userID.rawValue])
            try Self.voidEmailActions(userID: userID.rawValue, purposes: [.changeEmail], at: now.millisecondsSince1970, in: db)
        }
    }

    /// The number of password reset rows of `userID` (for tests).
    public func passwordResetCount(userID: UserID) async throws -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM password_resets WHERE userId = ?", arguments: [userID.rawValue]) ?? 0
        }
    }
}

extension SQLiteUserStore {
    /// The password reset mails in the outbox, oldest first (for tests).
    public func passwordResetMails() async throws -> [MailMessage] {
        let rows = try await read { db in
            try String.fetchAll(db, sql: "SELECT message FROM outbox WHERE kind = ? ORDER BY id", arguments: [MailTemplates.Kind.passwordReset.rawValue])
        }
        return try rows.map { try JSONDecoder().decode(MailMessage.self, from: Data($0.utf8)) }
    }
}
