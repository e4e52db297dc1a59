import Foundation
import GatehouseContracts
import IdentityPorts
import GatehouseSupport
import GRDB
import IdentityCore
import Mail

/// The confirmed email change (issue 19 §4) on `email_actions`: a pending change (a
/// `change_email` code and its mail to the new address), its confirmation (the new address, a
/// `revert_email` code and its notice to the old address), and the revert. Each is one
/// transaction: the code, the user and the mail are written together or not at all.
extension SQLiteUserStore {
    /// The unused, unexpired code of `purpose` with this hash, or nil.
    public func emailChangeCode(codeHash: Data, purpose: EmailActionPurpose, now: Date) async throws -> EmailChangeCode? {
        try await read { db in
            guard let row = try Row.fetchOne(
                db, sql: """
                    SELECT userId, email, emailNormalized, fromEmailNormalized, previousVerified FROM email_actions
                    WHERE codeHash = ? AND purpose = ? AND usedAt IS NULL AND expiresAt > ?
                    """, arguments: [codeHash, purpose.rawValue, now.millisecondsSince1970])
            else { return nil }
            return EmailChangeCode(
                userID: UserID(row[0] as String), email: row[1], emailNormalized: row[2], fromEmailNormalized: row[3],
                previousVerified: (row[4] as Int64) != 0)
        }
    }

    /// In one transaction: checks that `userID` is enabled and still has the address
    /// `fromNormalized` (`versionConflict` otherwise), that no other user has `email`
    /// (`emailExists`), and the per-user limits on change mails (`mailRateLimited` with the
    /// seconds until the next one is allowed); voids the user's unused change codes; stores the
    /// code (`email` the new address, `fromEmailNormalized` the current one); queues the mail
    /// `mail(currentTypedEmail)` builds. The user itself is unchanged.
    public func storeEmailChange(
        userID: UserID, from fromNormalized: String, to email: EmailAddress, codeHash: Data, expiresAt: Date, now: Date,
        perMinute: Int, perHour: Int, mail: @escaping @Sendable (_ currentEmail: String) -> MailMessage
    ) async throws {
        try await run { db in
            let nowMs = now.millisecondsSince1970
            let user = try Self.emailChangeUserState(userID, in: db)
            guard !user.disabled else { throw IdentityError.userDisabled }
            guard user.emailNormalized == fromNormalized, let current = user.email else {
                throw IdentityError.versionConflict(current: user.version)
            }
            if try Self.emailChangeAddressTaken(email.normalized, userID: userID, in: db) { throw IdentityError.emailExists }
            if let wait = try Self.emailChangeRetryAfter(userID, nowMs: nowMs, perMinute: perMinute, perHour: perHour, in: db) {
                throw IdentityError.mailRateLimited(retryAfterSeconds: wait)
            }
            try Self.voidEmailActions(userID: userID.rawValue, purposes: [.changeEmail], at: nowMs, in: db)
            try Self.emailChangeInsertCode(
                .changeEmail, userID: userID, codeHash: codeHash, email: email.typed, emailNormalized: email.normalized,
                from: fromNormalized, previousVerified: user.verified, expiresAt: expiresAt, nowMs: nowMs, in: db)
            try Self.enqueue(mail(current), in: db, at: now)
        }
    }

    /// In one transaction: uses the `change_email` code (unused, unexpired; the user enabled —
    /// `userDisabled` — and still at the code's `fromEmailNormalized`, else
    /// `invalidEmailChangeCode`; the new address free — `emailExists`, the code stays unused);
    /// sets the user's email to the new address, verified (version + 1); voids the user's other
    /// change and verify codes and password reset codes; stores a `revert_email` code for the
    /// old address (`revertCodeHash`, until `revertExpiresAt`); queues `notice(oldEmail,
    /// newEmail)` (to the old address). Returns the user's id.
    public func confirmEmailChange(
        codeHash: Data, revertCodeHash: Data, revertExpiresAt: Date, now: Date,
        notice: @escaping @Sendable (_ oldEmail: String, _ newEmail: String) -> MailMessage
    ) async throws -> UserID {
        try await run { db in
            let nowMs = now.millisecondsSince1970
            guard let code = try Self.emailChangeLiveCode(codeHash, .changeEmail, nowMs: nowMs, in: db) else {
                throw IdentityError.invalidEmailChangeCode
            }
            let user = try Self.emailChangeUserState(code.userID, in: db)
            guard !user.disabled else { throw IdentityError.userDisabled }
            guard let oldEmail = user.email, let oldNormalized = user.emailNormalized, oldNormalized == code.fromEmailNormalized else {
                throw IdentityError.invalidEmailChangeCode
            }
            if try Self.emailChangeAddressTaken(code.emailNormalized, userID: code.userID, in: db) { throw IdentityError.emailExists }
            try Self.emailChangeSetEmail(code.email, normalized: code.emailNormalized, of: code.userID, nowMs: nowMs, in: db)
            try db.execute(sql: "UPDATE email_actions SET usedAt = ? WHERE id = ?", arguments: [nowMs, code.id])
            try Self.voidEmailActions(userID: code.userID.rawValue, purposes: [.changeEmail, .verifyEmail], at: nowMs, in: db)
            try Self.emailChangeVoidResets(code.userID, nowMs: nowMs, in: db)
            try Self.emailChangeInsertCode(
                .revertEmail, userID: code.userID, codeHash: revertCodeHash, email: oldEmail, emailNormalized: oldNormalized,
                from: code.emailNormalized, previousVerified: user.verified, expiresAt: revertExpiresAt, nowMs: nowMs, in: db)
            try Self.enqueue(notice(oldEmail, code.email), in: db, at: now)
            return code.userID
        }
    }

    /// In one transaction: uses the `revert_email` code (unused, unexpired, else
    /// `invalidEmailChangeCode`; the user enabled, else `userDisabled`; the old address free,
    /// else `emailExists`); restores the old address, verified (version + 1); voids the user's
    /// change and verify codes, the revert codes made AFTER this one (a later change's), and
    /// password reset codes. Revert codes made before this one stay usable: whoever changed the
    /// address twice cannot disarm the first owner's revert with the second one. With `reset`,
    /// the password is cleared (whoever took the account usually set their own) and a password
    /// reset code with its mail to the restored address is stored in the same transaction.
    /// Returns the user's id.
    public func revertEmailChange(codeHash: Data, now: Date, reset: RevertPasswordReset?) async throws -> UserID {
        try await run { db in
            let nowMs = now.millisecondsSince1970
            guard let code = try Self.emailChangeLiveCode(codeHash, .revertEmail, nowMs: nowMs, in: db) else {
                throw IdentityError.invalidEmailChangeCode
            }
            let user = try Self.emailChangeUserState(code.userID, in: db)
            guard !user.disabled else { throw IdentityError.userDisabled }
            if try Self.emailChangeAddressTaken(code.emailNormalized, userID: code.userID, in: db) { throw IdentityError.emailExists }
            try Self.emailChangeSetEmail(code.email, normalized: code.emailNormalized, of: code.userID, nowMs: nowMs, in: db)
            try db.execute(sql: "UPDATE email_actions SET usedAt = ? WHERE id = ?", arguments: [nowMs, code.id])
            try Self.voidEmailActions(userID: code.userID.rawValue, purposes: [.changeEmail, .verifyEmail], at: nowMs, in: db)
            try db.execute(
                sql: "UPDATE email_actions SET usedAt = ? WHERE userId = ? AND purpose = ? AND usedAt IS NULL AND id > ?",
                arguments: [nowMs, code.userID.rawValue, EmailActionPurpose.revertEmail.rawValue, code.id])
            try Self.emailChangeVoidResets(code.userID, nowMs: nowMs, in: db)
            if let reset {
                try db.execute(sql: "UPDATE users SET passwordHash = NULL WHERE id = ?", arguments: [code.userID.rawValue])
                try db.execute(
                    sql: "INSERT INTO password_resets (userId, codeHash, expiresAt, createdAt) VALUES (?, ?, ?, ?)",
                    arguments: [code.userID.rawValue, reset.codeHash, reset.expiresAt.millisecondsSince1970, nowMs])
                try Self.enqueue(reset.mail(code.email), in: db, at: now)
            }
            return code.userID
        }
    }

    /// The unused codes of `userID` by purpose (for tests).
    public func emailChangeCodeCount(userID: UserID, purpose: EmailActionPurpose, now: Date) async throws -> Int {
        try await read { db in
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM email_actions WHERE userId = ? AND purpose = ? AND usedAt IS NULL AND expiresAt > ?",
                arguments: [userID.rawValue, purpose.rawValue, now.millisecondsSince1970]) ?? 0
        }
    }

    // MARK: Steps (inside a transaction)

    /// What the email change needs of a user row.
    struct EmailChangeUserState {
        var email: String?
        var emailNormalized: String?
        var verified: Bool
        var disabled: Bool
        var version: Int64
    }

    /// A code row the steps act on.
    struct EmailChangeRow {
        var id: Int64
        var userID: UserID
        var email: String
        var emailNormalized: String
        var fromEmailNormalized: String?
    }

    static func emailChangeUserState(_ id: UserID, in db: Database) throws -> EmailChangeUserState {
        guard let row = try Row.fetchOne(
            db, sql: "SELECT email, emailNormalized, emailVerified, disabled, version FROM users WHERE id = ?", arguments: [id.rawValue])
        else { throw IdentityError.userNotFound }
        return EmailChangeUserState(
            email: row[0], emailNormalized: row[1], verified: (row[2] as Int64) != 0, disabled: (row[3] as Int64) != 0, version: row[4])
    }

    static func emailChangeLiveCode(_ codeHash: Data, _ purpose: EmailActionPurpose, nowMs: Int64, in db: Database) throws -> EmailChangeRow? {
        guard let row = try Row.fetchOne(
            db, sql: """
                SELECT id, userId, email, emailNormalized, fromEmailNormalized FROM email_actions
                WHERE codeHash = ? AND purpose = ? AND usedAt IS NULL AND expiresAt > ?
                """, arguments: [codeHash, purpose.rawValue, nowMs])
        else { return nil }
        return EmailChangeRow(id: row[0], userID: UserID(row[1] as String), email: row[2], emailNormalized: row[3], fromEmailNormalized: row[4])
    }

    static func emailChangeAddressTaken(_ normalized: String, userID: UserID, in db: Database) throws -> Bool {
        try emailTakenOrReserved(normalized, userID: userID, in: db)
    }

    /// Seconds until one more change mail is allowed (nil: allowed now): past the per-minute or
    /// per-hour count, until the code that fills the window leaves it.
    static func emailChangeRetryAfter(_ userID: UserID, nowMs: Int64, perMinute: Int, perHour: Int, in db: Database) throws -> Int? {
        var wait: Int64 = 0
        for (limit, window) in [(perMinute, Int64(60_000)), (perHour, Int64(3_600_000))] {
            let blocking = try Int64.fetchOne(
                db, sql: """
                    SELECT createdAt FROM email_actions WHERE userId = ? AND purpose = ? AND createdAt > ?
                    ORDER BY createdAt DESC LIMIT 1 OFFSET ?
                    """, arguments: [userID.rawValue, EmailActionPurpose.changeEmail.rawValue, nowMs - window, max(limit, 1) - 1])
            if let blocking { wait = max(wait, blocking + window - nowMs) }
        }
        return wait > 0 ? Int((Double(wait) / 1000).rounded(.up)) : nil
    }

    static func emailChangeInsertCode(
        _ purpose: EmailActionPurpose, userID: UserID, codeHash: Data, email: String, emailNormalized: String, from: String?,
        previousVerified: Bool, expiresAt: Date, nowMs: Int64, in db: Database
    ) throws {
        try db.execute(
            sql: """
                INSERT INTO email_actions (purpose, userId, codeHash, email, emailNormalized, fromEmailNormalized, previousVerified, expiresAt, createdAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                purpose.rawValue, userID.rawValue, codeHash, email, emailNormalized, from, previousVerified ? 1 : 0,
                expiresAt.millisecondsSince1970, nowMs,
            ])
    }

    /// The user's address becomes `email` (verified); version + 1.
    static func emailChangeSetEmail(_ email: String, normalized: String, of userID: UserID, nowMs: Int64, in db: Database) throws {
        try db.execute(
            sql: "UPDATE users SET email = ?, emailNormalized = ?, emailVerified = 1, version = version + 1, updatedAt = ? WHERE id = ?",
            arguments: [email, normalized, nowMs, userID.rawValue])
    }

    static func emailChangeVoidResets(_ userID: UserID, nowMs: Int64, in db: Database) throws {
        try db.execute(sql: "UPDATE password_resets SET usedAt = ? WHERE userId = ? AND usedAt IS NULL", arguments: [nowMs, userID.rawValue])
    }
}
