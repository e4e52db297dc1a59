import Foundation
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
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
            let writes = MailCodeRules.verificationCode(userID: user.id, code: verification.emailAction, mail: verification.mail)
            try Self.apply(writes, at: user.createdAt, in: db)
        }
    }

    /// `update`, and in the same transaction the verification code and mail when the updated user
    /// has the code's address (`MailCodeRules.verificationAfterUpdate`; an anonymous user's upgrade
    /// with `GATEHOUSE_EMAIL_VERIFICATION` send or required): a refused change writes neither.
    public func update(
        id: UserID, now: Date, verification: PendingVerification, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await run { db in
            let user = try Self.update(id: id, expectedVersion: nil, now: now, in: db, change)
            let writes = MailCodeRules.verificationAfterUpdate(user: MailCodeUser(user), code: verification.emailAction, mail: verification.mail)
            if let writes { try Self.apply(writes, at: now, in: db) }
            return user
        }
    }

    /// In one transaction: reads the user and its verification codes of the last hour (voided ones
    /// included) and applies `MailCodeRules.requestEmailVerification`: `noAccount` unless `userID`
    /// exists, is enabled and has the normalized address `verification.emailNormalized`;
    /// `alreadyVerified`; `limited` past `perMinute` or `perHour` codes in the last minute or hour;
    /// otherwise the user's unused verification codes voided, the new one stored and its mail
    /// queued.
    public func storeEmailVerification(
        userID: UserID, verification: PendingVerification, now: Date, perMinute: Int, perHour: Int
    ) async throws -> EmailVerificationOutcome {
        try await run { db in
            let user = try Self.mailCodeUser(userID, in: db)
            let recent = try Self.recentEmailActionTimes(userID, .verifyEmail, now: now, in: db)
            let decision = MailCodeRules.requestEmailVerification(
                user: user, code: verification.emailAction, mail: verification.mail, recentCodes: recent, now: now,
                perMinute: perMinute, perHour: perHour)
            if let writes = decision.writes { try Self.apply(writes, at: now, in: db) }
            return decision.outcome
        }
    }

    /// In one transaction: reads the verification code with this hash and its user and applies
    /// `MailCodeRules.useEmailVerification`: `invalidVerificationCode` unless the code is unused,
    /// unexpired and for the user's current address; `userDisabled` (the code stays usable) when
    /// the user is disabled; otherwise every unused verification code of the user, this one
    /// included, voided and `emailVerified` set (version + 1). Returns the user after the change
    /// and whether it changed (false: it was verified already).
    public func useEmailVerification(codeHash: Data, now: Date) async throws -> (user: UserRecord, changed: Bool) {
        let audit = AuditScope.current
        return try await run { db in
            let code = try Self.storedEmailAction(codeHash, in: db)
            let record = try code.flatMap { try Row.fetchOne(db.cachedStatement(sql: Self.selectByIDSQL), arguments: [$0.userID.rawValue]) }
                .map(Self.record)
            let decision: (writes: MailCodeWrites<MailMessage>, markVerified: Bool) = try MailCodeRules.useEmailVerification(
                code: code, user: record.map(MailCodeUser.init), now: now)
            guard let user = record else { throw IdentityError.invalidVerificationCode }  // not reached: the decision refused
            try Self.apply(decision.writes, at: now, in: db)
            guard decision.markVerified else {
                audit?.discard()  // verified already: nothing to record
                return (user, false)
            }
            return (try Self.update(id: user.id, expectedVersion: nil, now: now, in: db) { $0.emailVerified = true }, true)
        }
    }

}
