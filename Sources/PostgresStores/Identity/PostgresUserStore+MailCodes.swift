import Foundation
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import Mail
import PostgresNIO

// Password reset codes, email verification and the operator's link codes on PostgreSQL (issue
// 24): the SQLite store's `+PasswordReset`, `+EmailVerification` and `+AdminUsers`
// (`storeLinkCode`, `update(voidingCodes:)`). The rules are `MailCodeRules`' (issue 36): each
// write reads what its decision takes and applies what it returns (`+MailCodeWrites`). Each
// method is one transaction; those that count, void or use a user's codes lock the user's row
// first (see `PostgresUserStore+Mail`).
extension PostgresUserStore {
    // MARK: Password reset

    /// In one transaction: locks and reads the user and reads its reset codes of the last hour,
    /// then applies `MailCodeRules.requestPasswordReset` (`noAccount` unless enabled and at the
    /// normalized email `email`; `limited` past `perMinute` or `perHour`; otherwise the older
    /// codes voided, `codeHash` stored and `mail` queued; rows older than a day deleted).
    public func storePasswordReset(
        userID: UserID, email: String, codeHash: Data, expiresAt: Date, mail: MailMessage, now: Date, perMinute: Int, perHour: Int
    ) async throws -> PasswordResetOutcome {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let user = try await Self.mailCodeUser(userID, on: connection, logger: log)
            let recent = try await Self.recentResetTimes(userID, now: now, on: connection, logger: log)
            let decision = MailCodeRules.requestPasswordReset(
                user: user, email: email, recentCodes: recent, code: NewResetCode(codeHash: codeHash, expiresAt: expiresAt), mail: mail,
                now: now, perMinute: perMinute, perHour: perHour)
            if let writes = decision.writes { try await Self.apply(writes, at: now, on: connection, wake: wake, logger: log) }
            return decision.outcome
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

    /// In one transaction: locks and reads the user, reads the code, and applies
    /// `MailCodeRules.usePasswordReset`: the code used, the user's other codes and pending email
    /// changes voided, the password hash set with the address verified (version + 1).
    /// `invalidResetCode` when the code no longer qualifies or the user is gone or disabled.
    public func usePasswordReset(codeHash: Data, userID: UserID, passwordHash: String, now: Date) async throws {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let user = try await Self.mailCodeUser(userID, on: connection, logger: log)
            let code = try await Self.storedResetCode(codeHash, on: connection, logger: log)
            let writes: MailCodeWrites<MailMessage> = try MailCodeRules.usePasswordReset(
                code: code, userID: userID, user: user, passwordHash: passwordHash, now: now)
            try await Self.apply(writes, at: now, on: connection, wake: wake, logger: log)
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
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            try await Self.lockUser(userID, on: connection, logger: log)
            try await Self.apply(MailCodeRules.passwordChanged(userID: userID), at: now, on: connection, wake: wake, logger: log)
        }
    }

    // MARK: Email verification

    /// Inserts `user` and, in the same transaction, stores its verification code and queues its
    /// mail. `emailExists` as `insert`.
    public func insert(_ user: UserRecord, verification: PendingVerification) async throws {
        try await mailTransaction { connection, wake in
            try await Self.insert(user, on: connection, logger: self.queryLogger)
            let writes = MailCodeRules.verificationCode(userID: user.id, code: verification.emailAction, mail: verification.mail)
            try await Self.apply(writes, at: user.createdAt, on: connection, wake: wake, logger: self.queryLogger)
        }
    }

    /// `update`, and in the same transaction the verification code and mail when the updated
    /// user has the code's address (`MailCodeRules.verificationAfterUpdate`): a refused change
    /// writes neither.
    public func update(
        id: UserID, now: Date, verification: PendingVerification, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await mailTransaction { connection, wake in
            let user = try await Self.updateLockedUser(id: id, now: now, on: connection, logger: self.queryLogger, change)
            let writes = MailCodeRules.verificationAfterUpdate(user: MailCodeUser(user), code: verification.emailAction, mail: verification.mail)
            if let writes { try await Self.apply(writes, at: now, on: connection, wake: wake, logger: self.queryLogger) }
            return user
        }
    }

    /// In one transaction: locks and reads the user, reads its verification codes of the last
    /// hour (voided ones included), and applies `MailCodeRules.requestEmailVerification`
    /// (`noAccount` unless enabled and at `verification.emailNormalized`; `alreadyVerified`;
    /// `limited` with the seconds to wait; otherwise the older codes voided, the new one stored
    /// and its mail queued).
    public func storeEmailVerification(
        userID: UserID, verification: PendingVerification, now: Date, perMinute: Int, perHour: Int
    ) async throws -> EmailVerificationOutcome {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let user = try await Self.mailCodeUser(userID, on: connection, logger: log)
            let recent = try await Self.recentEmailActionTimes(userID, .verifyEmail, now: now, on: connection, logger: log)
            let decision = MailCodeRules.requestEmailVerification(
                user: user, code: verification.emailAction, mail: verification.mail, recentCodes: recent, now: now,
                perMinute: perMinute, perHour: perHour)
            if let writes = decision.writes { try await Self.apply(writes, at: now, on: connection, wake: wake, logger: log) }
            return decision.outcome
        }
    }

    /// In one transaction: reads the verification code with this hash, locks its user and reads
    /// the code again under that lock (`lockedEmailAction`), and applies
    /// `MailCodeRules.useEmailVerification`: `invalidVerificationCode` unless live and for the
    /// user's current address; `userDisabled` (the code stays usable); otherwise the user's
    /// verification codes voided and `emailVerified` set (version + 1). The user after it, and
    /// whether it changed.
    public func useEmailVerification(codeHash: Data, now: Date) async throws -> (user: UserRecord, changed: Bool) {
        let audit = AuditScope.current
        let (user, changed) = try await mailTransaction { connection, wake -> (UserRecord, Bool) in
            let log = self.queryLogger
            let (code, record) = try await Self.lockedEmailAction(codeHash, .verifyEmail, now: now, on: connection, logger: log)
            let decision: (writes: MailCodeWrites<MailMessage>, markVerified: Bool) = try MailCodeRules.useEmailVerification(
                code: code, user: record.map(MailCodeUser.init), now: now)
            guard let user = record else { throw IdentityError.invalidVerificationCode }  // not reached: the decision refused
            try await Self.apply(decision.writes, at: now, on: connection, wake: wake, logger: log)
            guard decision.markVerified else {
                audit?.discard()  // verified already: nothing to record
                return (user, false)
            }
            return (try await Self.updateLockedUser(id: user.id, now: now, on: connection, logger: log) { $0.emailVerified = true }, true)
        }
        return (user, changed)
    }

    // MARK: Admin

    /// Stores a `kind` code (its SHA-256) for `userID`, voiding the user's older codes of that
    /// kind, without a mail, in one transaction (the user locked; `MailCodeRules.linkCode`);
    /// `userNotFound` when the user is gone, disabled, or no longer has the address
    /// `emailNormalized`.
    public func storeLinkCode(
        _ kind: LinkCodeKind, userID: UserID, email: String, emailNormalized: String, codeHash: Data, expiresAt: Date, now: Date
    ) async throws {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let user = try await Self.mailCodeUser(userID, on: connection, logger: log)
            let writes: MailCodeWrites<MailMessage> = try MailCodeRules.linkCode(
                kind, user: user, email: email, emailNormalized: emailNormalized, codeHash: codeHash, expiresAt: expiresAt)
            try await Self.apply(writes, at: now, on: connection, wake: wake, logger: log)
        }
    }

    /// `update`, and with `voidingCodes` in the same transaction the user's unused password reset
    /// codes and pending email changes and verifications voided
    /// (`MailCodeRules.operatorChangedCredentials`). Revert codes stay.
    public func update(
        id: UserID, now: Date, voidingCodes: Bool, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let user = try await Self.updateLockedUser(id: id, now: now, on: connection, logger: log, change)
            if voidingCodes {
                try await Self.apply(MailCodeRules.operatorChangedCredentials(userID: id), at: now, on: connection, wake: wake, logger: log)
            }
            return user
        }
    }
}
