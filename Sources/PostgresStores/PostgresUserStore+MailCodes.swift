import Foundation
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import Mail
import PostgresNIO

// Password reset codes, email verification and the operator's link codes on PostgreSQL (issue
// 24): the SQLite store's `+PasswordReset`, `+EmailVerification` and `+AdminUsers`
// (`storeLinkCode`, `update(voidingCodes:)`), with the same outcomes, error codes and limits. Each method is one transaction; those that count, void or
// use a user's codes lock the user's row first (see `PostgresUserStore+Mail`).
extension PostgresUserStore {
    // MARK: Password reset

    /// In one transaction: locks the user (enabled, with the normalized email `email`, else
    /// `noAccount`); deletes its rows older than a day; checks the per-address limits
    /// (`perMinute`, `perHour` codes made in the last minute and hour: `limited`); voids its
    /// unused codes; stores `codeHash`; queues `mail`.
    public func storePasswordReset(
        userID: UserID, email: String, codeHash: Data, expiresAt: Date, mail: MailMessage, now: Date, perMinute: Int, perHour: Int
    ) async throws -> PasswordResetOutcome {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let nowMs = now.millisecondsSince1970
            guard let disabled = try await Self.mailRows(
                "SELECT disabled FROM users WHERE id = \(userID.rawValue) AND email_normalized = \(email) FOR UPDATE", on: connection, logger: log
            ).first?.decode(Bool.self), !disabled
            else { return .noAccount }
            try await Self.mailRows(
                "DELETE FROM password_resets WHERE user_id = \(userID.rawValue) AND created_at < \(nowMs - 86_400_000)", on: connection, logger: log)
            let countRow = try await Self.mailRows(
                """
                SELECT count(*) FILTER (WHERE created_at > \(nowMs - 60_000)), count(*) FILTER (WHERE created_at > \(nowMs - 3_600_000))
                FROM password_resets WHERE user_id = \(userID.rawValue)
                """, on: connection, logger: log
            ).first
            let (minute, hour): (Int64, Int64) = try countRow.map { try $0.decode((Int64, Int64).self) } ?? (0, 0)
            if minute >= perMinute || hour >= perHour { return .limited }
            try await Self.voidResets(userID: userID, at: nowMs, on: connection, logger: log)
            try await Self.insertReset(userID: userID, codeHash: codeHash, expiresAt: expiresAt, nowMs: nowMs, on: connection, logger: log)
            try await Self.enqueue(mail, on: connection, at: now, wake: wake, logger: log)
            return .queued
        }
    }

    /// The user of an unused, unexpired code (by its hash) and that user's normalized email.
    public func passwordResetUser(codeHash: Data, now: Date) async throws -> (UserID, String?)? {
        let found = try await run { connection in
            try await Self.mailRows(
                """
                SELECT u.id, u.email_normalized FROM password_resets r JOIN users u ON u.id = r.user_id
                WHERE r.code_hash = \(codeHash) AND r.used_at IS NULL AND r.expires_at > \(now.millisecondsSince1970)
                """, on: connection, logger: self.queryLogger
            ).first?.decode((String, String?).self)
        }
        return found.map { (UserID(rawValue: $0.0), $0.1) }
    }

    /// In one transaction (the user locked): marks the code (unused, unexpired, of `userID`) and
    /// every other unused code of the user used, voids its pending email changes, and sets the
    /// password hash with the address verified (version + 1), only while the user is enabled.
    /// `invalidResetCode` when the code no longer qualifies or the user is disabled.
    public func usePasswordReset(codeHash: Data, userID: UserID, passwordHash: String, now: Date) async throws {
        try await transaction { connection in
            let log = self.queryLogger
            let nowMs = now.millisecondsSince1970
            try await Self.lockUser(userID, on: connection, logger: log)
            let used = try await Self.mailRows(
                """
                UPDATE password_resets SET used_at = \(nowMs)
                WHERE code_hash = \(codeHash) AND user_id = \(userID.rawValue) AND used_at IS NULL AND expires_at > \(nowMs)
                RETURNING id
                """, on: connection, logger: log)
            guard used.count == 1 else { throw IdentityError.invalidResetCode }
            try await Self.voidResets(userID: userID, at: nowMs, on: connection, logger: log)
            try await Self.voidEmailActions(userID: userID, purposes: [.changeEmail], at: nowMs, on: connection, logger: log)
            let set = try await Self.mailRows(
                """
                UPDATE users SET password_hash = \(passwordHash), email_verified = true, version = version + 1, updated_at = \(nowMs)
                WHERE id = \(userID.rawValue) AND NOT disabled RETURNING id
                """, on: connection, logger: log)
            guard set.count == 1 else { throw IdentityError.invalidResetCode }
        }
    }

    /// Deletes the reset rows that expired or were used before `cutoff`; how many.
    @discardableResult
    public func purgePasswordResets(before cutoff: Date) async throws -> Int {
        try await transaction { connection in
            try await Self.purgeCodes(in: "password_resets", before: cutoff, on: connection, logger: self.queryLogger)
        }
    }

    /// Voids every unused reset code and every pending email change of `userID`.
    public func voidPasswordResets(userID: UserID, at now: Date) async throws {
        try await transaction { connection in
            let log = self.queryLogger
            let nowMs = now.millisecondsSince1970
            try await Self.lockUser(userID, on: connection, logger: log)
            try await Self.voidResets(userID: userID, at: nowMs, on: connection, logger: log)
            try await Self.voidEmailActions(userID: userID, purposes: [.changeEmail], at: nowMs, on: connection, logger: log)
        }
    }

    /// The number of password reset rows of `userID` (tests).
    public func passwordResetCount(userID: UserID) async throws -> Int {
        try await run { connection in
            try await Self.mailCount(
                "SELECT count(*) FROM password_resets WHERE user_id = \(userID.rawValue)", on: connection, logger: self.queryLogger)
        }
    }

    // MARK: Email verification

    /// Inserts `user` and, in the same transaction, stores its verification code and queues its
    /// mail. `emailExists` as `insert`.
    public func insert(_ user: UserRecord, verification: PendingVerification) async throws {
        try await mailTransaction { connection, wake in
            try await Self.insert(user, on: connection, logger: self.queryLogger)
            try await Self.storeVerification(verification, userID: user.id, at: user.createdAt, on: connection, wake: wake, logger: self.queryLogger)
        }
    }

    /// `update`, and in the same transaction the verification code and mail when the updated
    /// user has the code's address: a refused change writes neither.
    public func update(
        id: UserID, now: Date, verification: PendingVerification, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await mailTransaction { connection, wake in
            let user = try await Self.updateLockedUser(id: id, now: now, on: connection, logger: self.queryLogger, change)
            guard user.emailNormalized == verification.emailNormalized else { return user }
            try await Self.storeVerification(verification, userID: id, at: now, on: connection, wake: wake, logger: self.queryLogger)
            return user
        }
    }

    /// In one transaction: locks the user (enabled, at `verification.emailNormalized`, else
    /// `noAccount`; verified already: `alreadyVerified`); checks the per-user limits (codes made
    /// in the last minute and hour, voided ones included: `limited` with the seconds to wait);
    /// voids the older codes, stores the new one and queues its mail.
    public func storeEmailVerification(
        userID: UserID, verification: PendingVerification, now: Date, perMinute: Int, perHour: Int
    ) async throws -> EmailVerificationOutcome {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let nowMs = now.millisecondsSince1970
            guard let state = try await Self.mailRows(
                """
                SELECT disabled, email_verified FROM users WHERE id = \(userID.rawValue) AND email_normalized = \(verification.emailNormalized)
                FOR UPDATE
                """, on: connection, logger: log
            ).first?.decode((Bool, Bool).self), !state.0
            else { return .noAccount }
            if state.1 { return .alreadyVerified }
            let made = try await Self.mailRows(
                """
                SELECT created_at FROM email_actions
                WHERE user_id = \(userID.rawValue) AND purpose = \(EmailActionPurpose.verifyEmail.rawValue) AND created_at > \(nowMs - 3_600_000)
                ORDER BY created_at
                """, on: connection, logger: log
            ).map { try $0.decode(Int64.self) }
            let wait = max(
                Self.wait(made: made, now: nowMs, limit: perMinute, window: 60_000),
                Self.wait(made: made, now: nowMs, limit: perHour, window: 3_600_000))
            if wait > 0 { return .limited(retryAfterSeconds: Int((wait + 999) / 1000)) }
            try await Self.storeVerification(verification, userID: userID, at: now, on: connection, wake: wake, logger: log)
            return .queued
        }
    }

    /// Milliseconds until fewer than `limit` of the codes made at `made` (sorted, oldest first)
    /// fall in the last `window` ms; 0 when that is so already (as `SQLiteUserStore.wait`).
    static func wait(made: [Int64], now: Int64, limit: Int, window: Int64) -> Int64 {
        let inWindow = made.filter { $0 > now - window }
        let limit = max(1, limit)
        guard inWindow.count >= limit else { return 0 }
        return max(1, inWindow[inWindow.count - limit] + window - now)
    }

    /// Voids the user's unused verification codes, stores `verification`'s and queues its mail
    /// (in the caller's transaction).
    static func storeVerification(
        _ verification: PendingVerification, userID: UserID, at now: Date, on connection: PostgresConnection, wake: OutboxWake, logger: Logger
    ) async throws {
        let nowMs = now.millisecondsSince1970
        try await voidEmailActions(userID: userID, purposes: [.verifyEmail], at: nowMs, on: connection, logger: logger)
        try await insertEmailAction(
            .verifyEmail, userID: userID, codeHash: verification.codeHash, email: verification.email,
            emailNormalized: verification.emailNormalized, from: nil, previousVerified: false, expiresAt: verification.expiresAt,
            nowMs: nowMs, on: connection, logger: logger)
        try await enqueue(verification.mail, on: connection, at: now, wake: wake, logger: logger)
    }

    /// In one transaction: takes the verification code with this hash (unused, unexpired), locks
    /// its user and reads the code again under that lock; checks that the code's address is
    /// still the user's (`invalidVerificationCode`) and that the user is enabled
    /// (`userDisabled`; the code stays usable); voids the user's verification codes and sets
    /// `emailVerified` (version + 1). The user after it, and whether it changed.
    public func useEmailVerification(codeHash: Data, now: Date) async throws -> (user: UserRecord, changed: Bool) {
        let audit = AuditScope.current
        let (user, changed) = try await transaction { connection -> (UserRecord, Bool) in
            let log = self.queryLogger
            let nowMs = now.millisecondsSince1970
            let live: PostgresQuery = try """
                SELECT user_id, email_normalized FROM email_actions
                WHERE code_hash = \(codeHash) AND purpose = \(EmailActionPurpose.verifyEmail.rawValue) AND used_at IS NULL AND expires_at > \(nowMs)
                """
            guard let seen = try await Self.mailRows(live, on: connection, logger: log).first?.decode((String, String).self),
                let user = try await Self.user(where: "id", seen.0, forUpdate: true, on: connection, logger: log),
                let code = try await Self.mailRows(live, on: connection, logger: log).first?.decode((String, String).self)
            else { throw IdentityError.invalidVerificationCode }
            guard user.emailNormalized == code.1 else { throw IdentityError.invalidVerificationCode }
            guard !user.disabled else { throw IdentityError.userDisabled }
            try await Self.voidEmailActions(userID: user.id, purposes: [.verifyEmail], at: nowMs, on: connection, logger: log)
            if user.emailVerified {
                audit?.discard()  // verified already: nothing to record
                return (user, false)
            }
            return (try await Self.updateLockedUser(id: user.id, now: now, on: connection, logger: log) { $0.emailVerified = true }, true)
        }
        return (user, changed)
    }

    /// The user's unused, unexpired verification codes (tests).
    public func activeEmailVerificationCount(userID: UserID, now: Date) async throws -> Int {
        try await emailChangeCodeCount(userID: userID, purpose: .verifyEmail, now: now)
    }

    // MARK: Admin

    /// Stores a `kind` code (its SHA-256) for `userID`, voiding the user's older codes of that
    /// kind, without a mail, in one transaction (the user locked); `userNotFound` when the user
    /// is gone, disabled, or no longer has the address `emailNormalized`.
    public func storeLinkCode(
        _ kind: LinkCodeKind, userID: UserID, email: String, emailNormalized: String, codeHash: Data, expiresAt: Date, now: Date
    ) async throws {
        try await transaction { connection in
            let log = self.queryLogger
            let nowMs = now.millisecondsSince1970
            guard let disabled = try await Self.mailRows(
                "SELECT disabled FROM users WHERE id = \(userID.rawValue) AND email_normalized = \(emailNormalized) FOR UPDATE",
                on: connection, logger: log
            ).first?.decode(Bool.self), !disabled
            else { throw IdentityError.userNotFound }
            switch kind {
            case .passwordReset:
                try await Self.voidResets(userID: userID, at: nowMs, on: connection, logger: log)
                try await Self.insertReset(userID: userID, codeHash: codeHash, expiresAt: expiresAt, nowMs: nowMs, on: connection, logger: log)
            case .verifyEmail:
                try await Self.voidEmailActions(userID: userID, purposes: [.verifyEmail], at: nowMs, on: connection, logger: log)
                try await Self.insertEmailAction(
                    .verifyEmail, userID: userID, codeHash: codeHash, email: email, emailNormalized: emailNormalized, from: nil,
                    previousVerified: false, expiresAt: expiresAt, nowMs: nowMs, on: connection, logger: log)
            }
        }
    }

    /// `update`, and with `voidingCodes` in the same transaction the user's unused password reset
    /// codes and pending email changes and verifications voided. Revert codes stay.
    public func update(
        id: UserID, now: Date, voidingCodes: Bool, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await transaction { connection in
            let log = self.queryLogger
            let user = try await Self.updateLockedUser(id: id, now: now, on: connection, logger: log, change)
            if voidingCodes {
                let nowMs = now.millisecondsSince1970
                try await Self.voidResets(userID: id, at: nowMs, on: connection, logger: log)
                try await Self.voidEmailActions(userID: id, purposes: [.changeEmail, .verifyEmail], at: nowMs, on: connection, logger: log)
            }
            return user
        }
    }
}
