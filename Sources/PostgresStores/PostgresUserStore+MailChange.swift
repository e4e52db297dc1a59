import Foundation
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import Mail
import PostgresNIO

// The confirmed email change on PostgreSQL (issue 24): SQLite's `+EmailChange`, each step in the
// caller's transaction, the user's row locked first (see `PostgresUserStore+Mail`).
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

    /// In one transaction: locks the user (enabled, else `userDisabled`; still at `fromNormalized`,
    /// else `versionConflict`); checks that `email` is no other user's and not reserved
    /// (`emailExists`) and the per-user limits on change mails (`mailRateLimited` with the
    /// seconds to wait); voids the user's unused change codes; stores the code; queues
    /// `mail(currentTypedEmail)`. The user itself is unchanged.
    public func storeEmailChange(
        userID: UserID, from fromNormalized: String, to email: EmailAddress, codeHash: Data, expiresAt: Date, now: Date,
        perMinute: Int, perHour: Int, mail: @escaping @Sendable (_ currentEmail: String) -> MailMessage
    ) async throws {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let nowMs = now.millisecondsSince1970
            let user = try await Self.emailChangeUserState(userID, on: connection, logger: log)
            guard !user.disabled else { throw IdentityError.userDisabled }
            guard user.emailNormalized == fromNormalized, let current = user.email else {
                throw IdentityError.versionConflict(current: user.version)
            }
            if try await Self.emailTakenOrReserved(email.normalized, userID: userID, on: connection, logger: log) {
                throw IdentityError.emailExists
            }
            if let wait = try await Self.emailChangeRetryAfter(userID, nowMs: nowMs, perMinute: perMinute, perHour: perHour, on: connection, logger: log) {
                throw IdentityError.mailRateLimited(retryAfterSeconds: wait)
            }
            try await Self.voidEmailActions(userID: userID, purposes: [.changeEmail], at: nowMs, on: connection, logger: log)
            try await Self.insertEmailAction(
                .changeEmail, userID: userID, codeHash: codeHash, email: email.typed, emailNormalized: email.normalized,
                from: fromNormalized, previousVerified: user.verified, expiresAt: expiresAt, nowMs: nowMs, on: connection, logger: log)
            try await Self.enqueue(mail(current), on: connection, at: now, wake: wake, logger: log)
        }
    }

    /// In one transaction: uses the `change_email` code (unused, unexpired, read again once its
    /// user is locked, so two confirmations of one code cannot both pass; the user enabled —
    /// `userDisabled` — and still at the code's `fromEmailNormalized`, else
    /// `invalidEmailChangeCode`; the new address free — `emailExists`, the code stays unused);
    /// sets the new address, verified (version + 1); voids the other change and verify codes and
    /// the reset codes; stores a `revert_email` code for the old address (which reserves it) and
    /// queues `notice(oldEmail, newEmail)`. The user's id.
    public func confirmEmailChange(
        codeHash: Data, revertCodeHash: Data, revertExpiresAt: Date, now: Date,
        notice: @escaping @Sendable (_ oldEmail: String, _ newEmail: String) -> MailMessage
    ) async throws -> UserID {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let nowMs = now.millisecondsSince1970
            let (code, user) = try await Self.lockedLiveCode(codeHash, .changeEmail, nowMs: nowMs, on: connection, logger: log)
            guard !user.disabled else { throw IdentityError.userDisabled }
            guard let oldEmail = user.email, let oldNormalized = user.emailNormalized, oldNormalized == code.fromEmailNormalized else {
                throw IdentityError.invalidEmailChangeCode
            }
            // Held until commit: a sign-up of the old address waits for the revert code below.
            try await Self.reservationLock(oldNormalized, on: connection, logger: log)
            if try await Self.emailTakenOrReserved(code.emailNormalized, userID: code.userID, on: connection, logger: log) {
                throw IdentityError.emailExists
            }
            try await Self.setEmail(code.email, normalized: code.emailNormalized, of: code.userID, nowMs: nowMs, on: connection, logger: log)
            try await Self.mailRows("UPDATE email_actions SET used_at = \(nowMs) WHERE id = \(code.id)", on: connection, logger: log)
            try await Self.voidEmailActions(userID: code.userID, purposes: [.changeEmail, .verifyEmail], at: nowMs, on: connection, logger: log)
            try await Self.voidResets(userID: code.userID, at: nowMs, on: connection, logger: log)
            try await Self.insertEmailAction(
                .revertEmail, userID: code.userID, codeHash: revertCodeHash, email: oldEmail, emailNormalized: oldNormalized,
                from: code.emailNormalized, previousVerified: user.verified, expiresAt: revertExpiresAt, nowMs: nowMs, on: connection, logger: log)
            try await Self.enqueue(notice(oldEmail, code.email), on: connection, at: now, wake: wake, logger: log)
            return code.userID
        }
    }

    /// In one transaction: uses the `revert_email` code (unused, unexpired, read again under the
    /// user's lock, else `invalidEmailChangeCode`; the user enabled, else `userDisabled`; the old
    /// address free, else `emailExists`); restores the old address, verified (version + 1);
    /// voids the change and verify codes, the revert codes made after this one, and the reset
    /// codes. With `reset`, clears the password and stores a reset code with its mail to the
    /// restored address. The user's id.
    public func revertEmailChange(codeHash: Data, now: Date, reset: RevertPasswordReset?) async throws -> UserID {
        try await mailTransaction { connection, wake in
            let log = self.queryLogger
            let nowMs = now.millisecondsSince1970
            let (code, user) = try await Self.lockedLiveCode(codeHash, .revertEmail, nowMs: nowMs, on: connection, logger: log)
            guard !user.disabled else { throw IdentityError.userDisabled }
            if try await Self.emailTakenOrReserved(code.emailNormalized, userID: code.userID, on: connection, logger: log) {
                throw IdentityError.emailExists
            }
            try await Self.setEmail(code.email, normalized: code.emailNormalized, of: code.userID, nowMs: nowMs, on: connection, logger: log)
            try await Self.mailRows("UPDATE email_actions SET used_at = \(nowMs) WHERE id = \(code.id)", on: connection, logger: log)
            try await Self.voidEmailActions(userID: code.userID, purposes: [.changeEmail, .verifyEmail], at: nowMs, on: connection, logger: log)
            try await Self.mailRows(
                """
                UPDATE email_actions SET used_at = \(nowMs)
                WHERE user_id = \(code.userID.rawValue) AND purpose = \(EmailActionPurpose.revertEmail.rawValue) AND used_at IS NULL AND id > \(code.id)
                """, on: connection, logger: log)
            try await Self.voidResets(userID: code.userID, at: nowMs, on: connection, logger: log)
            if let reset {
                try await Self.mailRows("UPDATE users SET password_hash = NULL WHERE id = \(code.userID.rawValue)", on: connection, logger: log)
                try await Self.insertReset(
                    userID: code.userID, codeHash: reset.codeHash, expiresAt: reset.expiresAt, nowMs: nowMs, on: connection, logger: log)
                try await Self.enqueue(reset.mail(code.email), on: connection, at: now, wake: wake, logger: log)
            }
            return code.userID
        }
    }

    /// The unused, unexpired codes of `userID` by purpose (tests).
    public func emailChangeCodeCount(userID: UserID, purpose: EmailActionPurpose, now: Date) async throws -> Int {
        try await run { connection in
            try await Self.mailCount(
                """
                SELECT count(*) FROM email_actions
                WHERE user_id = \(userID.rawValue) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > \(now.millisecondsSince1970)
                """, on: connection, logger: self.queryLogger)
        }
    }

    // MARK: Email change steps (inside a transaction)

    /// What the email change needs of a user row.
    struct EmailChangeUserState: Sendable {
        var email: String?
        var emailNormalized: String?
        var verified: Bool
        var disabled: Bool
        var version: Int64
    }

    /// A code row the steps act on.
    struct EmailChangeRow: Sendable {
        var id: Int64
        var userID: UserID
        var email: String
        var emailNormalized: String
        var fromEmailNormalized: String?
    }

    /// Locks the user's row and reads what the change needs of it; `userNotFound` when it is gone.
    static func emailChangeUserState(_ id: UserID, on connection: PostgresConnection, logger: Logger) async throws -> EmailChangeUserState {
        guard let row = try await mailRows(
            "SELECT email, email_normalized, email_verified, disabled, version FROM users WHERE id = \(id.rawValue) FOR UPDATE",
            on: connection, logger: logger
        ).first?.decode((String?, String?, Bool, Bool, Int64).self)
        else { throw IdentityError.userNotFound }
        let (email, normalized, verified, disabled, version) = row
        return EmailChangeUserState(email: email, emailNormalized: normalized, verified: verified, disabled: disabled, version: version)
    }

    /// The unused, unexpired code of `purpose` with this hash, or nil.
    static func emailChangeLiveCode(
        _ codeHash: Data, _ purpose: EmailActionPurpose, nowMs: Int64, on connection: PostgresConnection, logger: Logger
    ) async throws -> EmailChangeRow? {
        guard let row = try await mailRows(
            """
            SELECT id, user_id, email, email_normalized, from_email_normalized FROM email_actions
            WHERE code_hash = \(codeHash) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > \(nowMs)
            """, on: connection, logger: logger
        ).first?.decode((Int64, String, String, String, String?).self)
        else { return nil }
        let (id, userID, email, normalized, from) = row
        return EmailChangeRow(id: id, userID: UserID(rawValue: userID), email: email, emailNormalized: normalized, fromEmailNormalized: from)
    }

    /// The live code and its user, the user's row locked and the code read again under that lock
    /// (a transaction that used or voided it meanwhile has committed): `invalidEmailChangeCode`
    /// when there is no such code, before or after the lock.
    static func lockedLiveCode(
        _ codeHash: Data, _ purpose: EmailActionPurpose, nowMs: Int64, on connection: PostgresConnection, logger: Logger
    ) async throws -> (EmailChangeRow, EmailChangeUserState) {
        guard let seen = try await emailChangeLiveCode(codeHash, purpose, nowMs: nowMs, on: connection, logger: logger) else {
            throw IdentityError.invalidEmailChangeCode
        }
        let user = try await emailChangeUserState(seen.userID, on: connection, logger: logger)
        guard let code = try await emailChangeLiveCode(codeHash, purpose, nowMs: nowMs, on: connection, logger: logger) else {
            throw IdentityError.invalidEmailChangeCode
        }
        return (code, user)
    }

    /// Seconds until one more change mail is allowed (nil: allowed now): past the per-minute or
    /// per-hour count, until the code that fills the window leaves it.
    static func emailChangeRetryAfter(
        _ userID: UserID, nowMs: Int64, perMinute: Int, perHour: Int, on connection: PostgresConnection, logger: Logger
    ) async throws -> Int? {
        var wait: Int64 = 0
        for (limit, window) in [(perMinute, Int64(60_000)), (perHour, Int64(3_600_000))] {
            let blocking = try await mailRows(
                """
                SELECT created_at FROM email_actions
                WHERE user_id = \(userID.rawValue) AND purpose = \(EmailActionPurpose.changeEmail.rawValue) AND created_at > \(nowMs - window)
                ORDER BY created_at DESC LIMIT 1 OFFSET \(Int64(max(limit, 1) - 1))
                """, on: connection, logger: logger
            ).first?.decode(Int64.self)
            if let blocking { wait = max(wait, blocking + window - nowMs) }
        }
        return wait > 0 ? Int((Double(wait) / 1000).rounded(.up)) : nil
    }

    /// The user's address becomes `email` (verified); version + 1.
    static func setEmail(_ email: String, normalized: String, of userID: UserID, nowMs: Int64, on connection: PostgresConnection, logger: Logger) async throws {
        try await mailRows(
            """
            UPDATE users SET email = \(email), email_normalized = \(normalized), email_verified = true, version = version + 1, updated_at = \(nowMs)
            WHERE id = \(userID.rawValue)
            """, on: connection, logger: logger)
    }

}
