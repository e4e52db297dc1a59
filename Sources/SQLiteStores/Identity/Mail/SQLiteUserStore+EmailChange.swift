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
/// transaction: the code, the user and the mail are written together or not at all. The rules
/// are `MailCodeRules`' (issue 36): each write reads what its decision takes and applies what
/// it returns (`+MailCodeWrites`).
extension SQLiteUserStore {
    /// The unused, unexpired code of `purpose` with this hash, or nil.
    public func emailChangeCode(codeHash: Data, purpose: EmailActionPurpose, now: Date) async throws -> EmailChangeCode? {
        try await read { db in
            guard let row = try Row.fetchOne(
                db, sql: """
                    SELECT user_id, email, email_normalized, from_email_normalized, previous_verified FROM email_actions
                    WHERE code_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?
                    """, arguments: [codeHash, purpose.rawValue, now.millisecondsSince1970])
            else { return nil }
            return EmailChangeCode(
                userID: UserID(row[0] as String), email: row[1], emailNormalized: row[2], fromEmailNormalized: row[3],
                previousVerified: (row[4] as Int64) != 0)
        }
    }

    /// In one transaction: reads the user (`userNotFound`), whether `email` is taken or
    /// reserved, and the user's change codes of the last hour, and applies
    /// `MailCodeRules.requestEmailChange`: `userDisabled`; `versionConflict` unless the user still
    /// has the address `fromNormalized`; `emailExists`; `mailRateLimited` with the seconds until
    /// the next change mail is allowed; otherwise the user's unused change codes voided, the code
    /// stored (`email` the new address, `fromEmailNormalized` the current one) and the mail
    /// `mail(currentTypedEmail)` builds queued. The user itself is unchanged.
    public func storeEmailChange(
        userID: UserID, from fromNormalized: String, to email: EmailAddress, codeHash: Data, expiresAt: Date, now: Date,
        perMinute: Int, perHour: Int, mail: @escaping @Sendable (_ currentEmail: String) -> MailMessage
    ) async throws {
        try await run { db in
            let user = try Self.mailCodeUser(userID, in: db)
            let taken = try Self.emailTakenOrReserved(email.normalized, userID: userID, in: db)
            let recent = try Self.recentEmailActionTimes(userID, .changeEmail, now: now, in: db)
            let writes = try MailCodeRules.requestEmailChange(
                user: user, from: fromNormalized, to: email, addressTaken: taken, recentCodes: recent, codeHash: codeHash,
                expiresAt: expiresAt, now: now, perMinute: perMinute, perHour: perHour, mail: mail)
            try Self.apply(writes, at: now, in: db)
        }
    }

    /// In one transaction: reads the `change_email` code, its user and whether the new address is
    /// taken or reserved, and applies `MailCodeRules.confirmEmailChange`: the code unused and
    /// unexpired, the user enabled (`userDisabled`) and still at the code's
    /// `fromEmailNormalized`, else `invalidEmailChangeCode`; the new address free (`emailExists`,
    /// the code stays unused). Then sets the user's email to the new address, verified (version
    /// + 1); voids the user's other change and verify codes and password reset codes; stores a
    /// `revert_email` code for the old address (`revertCodeHash`, until `revertExpiresAt`), which
    /// reserves it; queues `notice(oldEmail, newEmail)` (to the old address). Returns the user's id.
    public func confirmEmailChange(
        codeHash: Data, revertCodeHash: Data, revertExpiresAt: Date, now: Date,
        notice: @escaping @Sendable (_ oldEmail: String, _ newEmail: String) -> MailMessage
    ) async throws -> UserID {
        try await run { db in
            let (code, user, taken) = try Self.emailChangeState(codeHash, in: db)
            let writes = try MailCodeRules.confirmEmailChange(
                code: code, user: user, addressTaken: taken, revertCodeHash: revertCodeHash, revertExpiresAt: revertExpiresAt, now: now,
                notice: notice)
            try Self.apply(writes, at: now, in: db)
            return writes.userID
        }
    }

    /// In one transaction: reads the `revert_email` code, its user and whether the old address is
    /// taken or reserved by another user, and applies `MailCodeRules.revertEmailChange`: the code
    /// unused and unexpired, else `invalidEmailChangeCode`; the user enabled, else
    /// `userDisabled`; the old address free, else `emailExists`. Then restores the old address,
    /// verified (version + 1); voids the user's change and verify codes, the revert codes made
    /// AFTER this one (a later change's), and password reset codes. Revert codes made before this
    /// one stay usable: whoever changed the address twice cannot disarm the first owner's revert
    /// with the second one. With `reset`, the password is cleared (whoever took the account
    /// usually set their own) and a password reset code with its mail to the restored address is
    /// stored in the same transaction. Returns the user's id.
    public func revertEmailChange(codeHash: Data, now: Date, reset: RevertPasswordReset?) async throws -> UserID {
        try await run { db in
            let (code, user, taken) = try Self.emailChangeState(codeHash, in: db)
            let writes = try MailCodeRules.revertEmailChange(
                code: code, user: user, addressTaken: taken, now: now, reset: reset.map { ($0.code, $0.mail) })
            try Self.apply(writes, at: now, in: db)
            return writes.userID
        }
    }

    /// The code with this hash (any state), its user, and whether the code's address is another
    /// user's or reserved for another: what a confirmation or a revert decides on.
    static func emailChangeState(_ codeHash: Data, in db: Database) throws -> (StoredEmailAction?, MailCodeUser?, Bool) {
        guard let code = try storedEmailAction(codeHash, in: db) else { return (nil, nil, false) }
        let user = try mailCodeUser(code.userID, in: db)
        return (code, user, try emailTakenOrReserved(code.emailNormalized, userID: code.userID, in: db))
    }
}
