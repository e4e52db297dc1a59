import Foundation
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import Mail
import PostgresNIO

// The confirmed email change on PostgreSQL (issue 24): SQLite's `+EmailChange`, the user's row
// locked first (see `PostgresUserStore+Mail`). The rules are `MailCodeRules`' (issue 36): each
// write reads what its decision takes and applies what it returns (`+MailCodeWrites`).
extension PostgresUserStore {
    // MARK: Email change

    /// The unused, unexpired code of `purpose` with this hash, or nil.
    public func emailChangeCode(codeHash: Data, purpose: EmailActionPurpose, now: Date) async throws -> EmailChangeCode? {
        try await run { connection in
            guard let row = try await Self.mailRows(
                """
                SELECT user_id, email, email_normalized, from_email_normalized, previous_verified FROM email_actions
                WHERE code_hash = \(codeHash) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > \(now.millisecondsSince1970)
                """, on: connection, logger: self.queryLogger
            ).first?.decode((String, String, String, String?, Bool).self)
            else { return nil }
            let (userID, email, normalized, from, previous) = row
            return EmailChangeCode(
                userID: UserID(rawValue: userID), email: email, emailNormalized: normalized, fromEmailNormalized: from, previousVerified: previous)
        }
    }

    /// In one transaction: locks and reads the user (`userNotFound`), reads whether `email` is
    /// another user's or reserved and the user's change codes of the last hour, and applies
    /// `MailCodeRules.requestEmailChange` (`userDisabled`; `versionConflict` unless still at
    /// `fromNormalized`; `emailExists`; `mailRateLimited` with the seconds to wait; otherwise the
    /// user's unused change codes voided, the code stored and `mail(currentTypedEmail)` queued).
    /// The user itself is unchanged.
    public func storeEmailChange(
        userID: UserID, from fromNormalized: String, to email: EmailAddress, codeHash: Data, expiresAt: Date, now: Date,
        perMinute: Int, perHour: Int, mail: @escaping @Sendable (_ currentEmail: String) -> MailMessage
    ) async throws {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let user = try await Self.mailCodeUser(userID, on: connection, logger: log)
            let taken = try await Self.emailTakenOrReserved(email.normalized, userID: userID, on: connection, logger: log)
            let recent = try await Self.recentEmailActionTimes(userID, .changeEmail, now: now, on: connection, logger: log)
            let writes = try MailCodeRules.requestEmailChange(
                user: user, from: fromNormalized, to: email, addressTaken: taken, recentCodes: recent, codeHash: codeHash,
                expiresAt: expiresAt, now: now, perMinute: perMinute, perHour: perHour, mail: mail)
            try await Self.apply(writes, at: now, on: connection, wake: wake, logger: log)
        }
    }

    /// In one transaction: reads the `change_email` code, locks its user and reads the code again
    /// (so two confirmations of one code cannot both pass), reads whether the new address is
    /// taken or reserved, and applies `MailCodeRules.confirmEmailChange` (the code live, the user
    /// enabled — `userDisabled` — and still at the code's `fromEmailNormalized`, else
    /// `invalidEmailChangeCode`; the new address free — `emailExists`, the code stays unused).
    /// Then the old address's reservation lock is taken (held until commit: a sign-up of the old
    /// address waits for the revert code), the new address set, verified (version + 1), the other
    /// change and verify codes and the reset codes voided, a `revert_email` code for the old
    /// address stored (which reserves it) and `notice(oldEmail, newEmail)` queued. The user's id.
    public func confirmEmailChange(
        codeHash: Data, revertCodeHash: Data, revertExpiresAt: Date, now: Date,
        notice: @escaping @Sendable (_ oldEmail: String, _ newEmail: String) -> MailMessage
    ) async throws -> UserID {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let (code, user, taken) = try await Self.emailChangeState(codeHash, .changeEmail, now: now, on: connection, logger: log)
            let writes = try MailCodeRules.confirmEmailChange(
                code: code, user: user, addressTaken: taken, revertCodeHash: revertCodeHash, revertExpiresAt: revertExpiresAt, now: now,
                notice: notice)
            try await Self.apply(writes, at: now, on: connection, wake: wake, logger: log)
            return writes.userID
        }
    }

    /// In one transaction: reads the `revert_email` code, locks its user and reads the code again,
    /// reads whether the old address is taken or reserved by another user, and applies
    /// `MailCodeRules.revertEmailChange` (the code live, else `invalidEmailChangeCode`; the user
    /// enabled, else `userDisabled`; the old address free, else `emailExists`): the old address
    /// restored, verified (version + 1); the change and verify codes, the revert codes made after
    /// this one, and the reset codes voided. With `reset`, the password cleared and a reset code
    /// stored with its mail to the restored address. The user's id.
    public func revertEmailChange(codeHash: Data, now: Date, reset: RevertPasswordReset?) async throws -> UserID {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let (code, user, taken) = try await Self.emailChangeState(codeHash, .revertEmail, now: now, on: connection, logger: log)
            let writes = try MailCodeRules.revertEmailChange(
                code: code, user: user, addressTaken: taken, now: now, reset: reset.map { ($0.code, $0.mail) })
            try await Self.apply(writes, at: now, on: connection, wake: wake, logger: log)
            return writes.userID
        }
    }

    /// The `purpose` code with this hash and its user (`lockedEmailAction`: the user locked, the
    /// code read again), and whether the code's address is another user's or reserved for
    /// another: what a confirmation or a revert decides on.
    static func emailChangeState(
        _ codeHash: Data, _ purpose: EmailActionPurpose, now: Date, on connection: PostgresConnection, logger: Logger
    ) async throws -> (StoredEmailAction?, MailCodeUser?, Bool) {
        let (code, user) = try await lockedEmailAction(codeHash, purpose, now: now, on: connection, logger: logger)
        guard let code, let user else { return (code, user.map(MailCodeUser.init), false) }
        let taken = try await emailTakenOrReserved(code.emailNormalized, userID: code.userID, on: connection, logger: logger)
        return (code, MailCodeUser(user), taken)
    }
}
