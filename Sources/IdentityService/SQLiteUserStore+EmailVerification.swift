import Foundation
import GatehouseSupport
import GRDB
import IdentityCore
import Mail

/// Email verification codes (issue 19 §3) in `email_actions` (purpose `verify_email`): a new code,
/// the voiding of the user's older ones and its mail (outbox) are written in one transaction, with
/// the user's insert (sign-up) or upgrade when those cause it.
extension SQLiteUserStore {
    /// Inserts `user` and, in the same transaction, stores its verification code and queues its
    /// mail (sign-up with `GATEHOUSE_EMAIL_VERIFICATION` send or required). `emailExists` as `insert`.
    public func insert(_ user: UserRecord, verification: PendingVerification) async throws {
        try await run { db in
            try db.cachedStatement(sql: Self.insertSQL).execute(arguments: Self.arguments(user))
            try Self.storeVerification(verification, userID: user.id, at: user.createdAt, in: db)
        }
    }

    /// `update`, and in the same transaction the verification code and mail (an anonymous user's
    /// upgrade with `GATEHOUSE_EMAIL_VERIFICATION` send or required): a refused change writes neither.
    public func update(
        id: UserID, now: Date, verification: PendingVerification, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await run { db in
            let user = try Self.update(id: id, expectedVersion: nil, now: now, in: db, change)
            guard user.emailNormalized == verification.emailNormalized else { return user }
            try Self.storeVerification(verification, userID: id, at: now, in: db)
            return user
        }
    }

    /// In one transaction: checks that `userID` exists, is enabled, has the normalized address
    /// `verification.emailNormalized` and has not verified it; checks the per-user limits
    /// (`perMinute`, `perHour` verification codes made in the last minute and hour, voided ones
    /// included); then voids the user's unused verification codes, stores the new one and queues
    /// its mail.
    public func storeEmailVerification(
        userID: UserID, verification: PendingVerification, now: Date, perMinute: Int, perHour: Int
    ) async throws -> EmailVerificationOutcome {
        try await run { db in
            let nowMs = now.millisecondsSince1970
            guard let row = try Row.fetchOne(
                db, sql: "SELECT disabled, emailVerified FROM users WHERE id = ? AND emailNormalized = ?",
                arguments: [userID.rawValue, verification.emailNormalized]),
                (row[0] as Int64) == 0
            else { return .noAccount }
            if (row[1] as Int64) != 0 { return .alreadyVerified }
            let made = try Int64.fetchAll(
                db, sql: "SELECT createdAt FROM email_actions WHERE userId = ? AND purpose = ? AND createdAt > ? ORDER BY createdAt",
                arguments: [userID.rawValue, EmailActionPurpose.verifyEmail.rawValue, nowMs - 3_600_000])
            let wait = Self.wait(made: made, now: nowMs, limit: perMinute, window: 60_000)
            let waitHour = Self.wait(made: made, now: nowMs, limit: perHour, window: 3_600_000)
            if max(wait, waitHour) > 0 { return .limited(retryAfterSeconds: Int((max(wait, waitHour) + 999) / 1000)) }
            try Self.storeVerification(verification, userID: userID, at: now, in: db)
            return .queued
        }
    }

    /// Milliseconds until fewer than `limit` of the codes made at `made` (sorted, oldest first)
    /// fall in the last `window` ms; 0 when that is so already.
    static func wait(made: [Int64], now: Int64, limit: Int, window: Int64) -> Int64 {
        let inWindow = made.filter { $0 > now - window }
        let limit = max(1, limit)
        guard inWindow.count >= limit else { return 0 }
        return max(1, inWindow[inWindow.count - limit] + window - now)
    }

    /// Voids the user's unused verification codes, stores `verification`'s and queues its mail
    /// (in the caller's transaction).
    static func storeVerification(_ verification: PendingVerification, userID: UserID, at now: Date, in db: Database) throws {
        let nowMs = now.millisecondsSince1970
        try voidEmailActions(userID: userID.rawValue, purposes: [.verifyEmail], at: nowMs, in: db)
        try db.execute(
            sql: """
                INSERT INTO email_actions (purpose, userId, codeHash, email, emailNormalized, expiresAt, createdAt)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                EmailActionPurpose.verifyEmail.rawValue, userID.rawValue, verification.codeHash, verification.email,
                verification.emailNormalized, verification.expiresAt.millisecondsSince1970, nowMs,
            ])
        try enqueue(verification.mail, in: db, at: now)
    }

    /// In one transaction: takes the verification code with this hash (unused, unexpired), checks
    /// that its address is still its user's (`invalidVerificationCode` otherwise) and that the
    /// user is enabled (`userDisabled`; the code stays usable), then sets `emailVerified`
    /// (version + 1) and voids every unused verification code of the user, this one included.
    /// Returns the user after the change and whether it changed (false: it was verified already).
    public func useEmailVerification(codeHash: Data, now: Date) async throws -> (user: UserRecord, changed: Bool) {
        let audit = AuditScope.current
        return try await run { db in
            let nowMs = now.millisecondsSince1970
            guard let row = try Row.fetchOne(
                db, sql: """
                    SELECT userId, emailNormalized FROM email_actions
                    WHERE codeHash = ? AND purpose = ? AND usedAt IS NULL AND expiresAt > ?
                    """, arguments: [codeHash, EmailActionPurpose.verifyEmail.rawValue, nowMs]),
                let userRow = try Row.fetchOne(db.cachedStatement(sql: Self.selectByIDSQL), arguments: [row[0] as String])
            else { throw IdentityError.invalidVerificationCode }
            let user = Self.record(userRow)
            guard user.emailNormalized == (row[1] as String) else { throw IdentityError.invalidVerificationCode }
            guard !user.disabled else { throw IdentityError.userDisabled }
            try Self.voidEmailActions(userID: user.id.rawValue, purposes: [.verifyEmail], at: nowMs, in: db)
            if user.emailVerified {
                audit?.discard()  // verified already: nothing to record
                return (user, false)
            }
            return (try Self.update(id: user.id, expectedVersion: nil, now: now, in: db) { $0.emailVerified = true }, true)
        }
    }

    /// The user's unused, unexpired verification codes (for tests).
    public func activeEmailVerificationCount(userID: UserID, now: Date) async throws -> Int {
        try await read { db in
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM email_actions WHERE userId = ? AND purpose = ? AND usedAt IS NULL AND expiresAt > ?",
                arguments: [userID.rawValue, EmailActionPurpose.verifyEmail.rawValue, now.millisecondsSince1970]) ?? 0
        }
    }

    /// The verification mails in the outbox, oldest first (for tests).
    public func emailVerificationMails() async throws -> [MailMessage] {
        let rows = try await read { db in
            try String.fetchAll(
                db, sql: "SELECT message FROM outbox WHERE kind = ? ORDER BY id", arguments: [MailTemplates.Kind.verifyEmail.rawValue])
        }
        return try rows.map { try JSONDecoder().decode(MailMessage.self, from: Data($0.utf8)) }
    }
}
