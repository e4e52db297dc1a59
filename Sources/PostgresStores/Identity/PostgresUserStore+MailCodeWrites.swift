import Foundation
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import Mail
import PostgresNIO

// What the mail-code flows read for their decisions (`MailCodeRules`), and the application of
// the `MailCodeWrites` a decision returns, in the caller's transaction: SQLite's
// `+MailCodeWrites`, with the user's row locked (see `PostgresUserStore+Mail`).
extension PostgresUserStore {
    // MARK: Reads

    /// Locks the user's row (`FOR UPDATE`, until the transaction ends) and reads what the
    /// decisions need of it; nil when there is none.
    static func mailCodeUser(_ id: UserID, on connection: PostgresConnection, logger: Logger) async throws -> MailCodeUser? {
        try await user(where: "id", id.rawValue, forUpdate: true, on: connection, logger: logger).map(MailCodeUser.init)
    }

    /// The reset row with this code hash, in any state, or nil.
    static func storedResetCode(_ codeHash: Data, on connection: PostgresConnection, logger: Logger) async throws -> StoredResetCode? {
        guard let row = try await mailRows(
            "SELECT id, user_id, expires_at, used_at FROM password_resets WHERE code_hash = \(codeHash)", on: connection, logger: logger
        ).first?.decode((Int64, String, Int64, Int64?).self)
        else { return nil }
        return StoredResetCode(id: row.0, userID: UserID(rawValue: row.1), expiresAt: row.2, usedAt: row.3)
    }

    /// The email action row with this code hash, in any state, or nil.
    static func storedEmailAction(_ codeHash: Data, on connection: PostgresConnection, logger: Logger) async throws -> StoredEmailAction? {
        guard let row = try await mailRows(
            """
            SELECT id, purpose, user_id, email, email_normalized, from_email_normalized, previous_verified, expires_at, used_at
            FROM email_actions WHERE code_hash = \(codeHash)
            """, on: connection, logger: logger
        ).first?.decode((Int64, String, String, String, String, String?, Bool, Int64, Int64?).self),
            let purpose = EmailActionPurpose(rawValue: row.1)
        else { return nil }
        return StoredEmailAction(
            id: row.0, purpose: purpose, userID: UserID(rawValue: row.2), email: row.3, emailNormalized: row.4,
            fromEmailNormalized: row.5, previousVerified: row.6, expiresAt: row.7, usedAt: row.8)
    }

    /// The email action row with this hash and its user, the user's row locked and the code read
    /// again under that lock (a transaction that used or voided it meanwhile has committed), so
    /// two uses of one code cannot both pass. Neither, and no lock, when the code is not a live
    /// `purpose` code at the first read; the code as first read when its user is gone: the
    /// decision refuses both.
    static func lockedEmailAction(
        _ codeHash: Data, _ purpose: EmailActionPurpose, now: Date, on connection: PostgresConnection, logger: Logger
    ) async throws -> (StoredEmailAction?, UserRecord?) {
        guard let seen = try await storedEmailAction(codeHash, on: connection, logger: logger), seen.isLive(for: purpose, at: now) else {
            return (nil, nil)
        }
        guard let user = try await user(where: "id", seen.userID.rawValue, forUpdate: true, on: connection, logger: logger) else {
            return (seen, nil)
        }
        return (try await storedEmailAction(codeHash, on: connection, logger: logger), user)
    }

    /// The creation times of the user's reset codes made after `MailCodeRules.recentSince(now)`.
    static func recentResetTimes(_ userID: UserID, now: Date, on connection: PostgresConnection, logger: Logger) async throws -> [Int64] {
        try await mailRows(
            """
            SELECT created_at FROM password_resets WHERE user_id = \(userID.rawValue) AND created_at > \(MailCodeRules.recentSince(now))
            ORDER BY created_at
            """, on: connection, logger: logger
        ).map { try $0.decode(Int64.self) }
    }

    /// The creation times of the user's `purpose` codes made after `MailCodeRules.recentSince(now)`.
    static func recentEmailActionTimes(
        _ userID: UserID, _ purpose: EmailActionPurpose, now: Date, on connection: PostgresConnection, logger: Logger
    ) async throws -> [Int64] {
        try await mailRows(
            """
            SELECT created_at FROM email_actions
            WHERE user_id = \(userID.rawValue) AND purpose = \(purpose.rawValue) AND created_at > \(MailCodeRules.recentSince(now))
            ORDER BY created_at
            """, on: connection, logger: logger
        ).map { try $0.decode(Int64.self) }
    }

    // MARK: Application

    /// Writes `writes` at `now`, part by part in the order `MailCodeWrites` gives; a reserved
    /// address is locked (`reservationLock`, until commit) before the user leaves it, so a
    /// sign-up of it waits for the revert code that reserves it.
    static func apply(
        _ writes: MailCodeWrites<MailMessage>, at now: Date, on connection: PostgresConnection, wake: OutboxWake, logger: Logger
    ) async throws {
        let nowMs = now.millisecondsSince1970
        let user = writes.userID.rawValue
        func execute(_ query: PostgresQuery) async throws { try await mailRows(query, on: connection, logger: logger) }
        if let before = writes.purgeResetsCreatedBefore {
            try await execute("DELETE FROM password_resets WHERE user_id = \(user) AND created_at < \(before)")
        }
        if let reserved = writes.reserveAddress { try await reservationLock(reserved, on: connection, logger: logger) }
        if let address = writes.newAddress {
            try await execute(
                """
                UPDATE users SET email = \(address.email), email_normalized = \(address.emailNormalized), email_verified = true,
                    version = version + 1, updated_at = \(nowMs)
                WHERE id = \(user)
                """)
        }
        if let id = writes.useResetCode { try await execute("UPDATE password_resets SET used_at = \(nowMs) WHERE id = \(id)") }
        if let id = writes.useEmailAction { try await execute("UPDATE email_actions SET used_at = \(nowMs) WHERE id = \(id)") }
        if writes.voidResets {
            try await execute("UPDATE password_resets SET used_at = \(nowMs) WHERE user_id = \(user) AND used_at IS NULL")
        }
        if !writes.voidEmailActions.isEmpty {
            try await execute(
                """
                UPDATE email_actions SET used_at = \(nowMs)
                WHERE user_id = \(user) AND purpose = ANY(\(writes.voidEmailActions.map(\.rawValue))) AND used_at IS NULL
                """)
        }
        if let after = writes.voidRevertCodesAfter {
            try await execute(
                """
                UPDATE email_actions SET used_at = \(nowMs)
                WHERE user_id = \(user) AND purpose = \(EmailActionPurpose.revertEmail.rawValue) AND used_at IS NULL AND id > \(after)
                """)
        }
        switch writes.password {
        case .reset(let hash):
            try await execute(
                """
                UPDATE users SET password_hash = \(hash), email_verified = true, version = version + 1, updated_at = \(nowMs)
                WHERE id = \(user)
                """)
        case .clear:
            try await execute("UPDATE users SET password_hash = NULL WHERE id = \(user)")
        case nil:
            break
        }
        if let code = writes.newResetCode {
            try await execute(
                """
                INSERT INTO password_resets (user_id, code_hash, expires_at, created_at)
                VALUES (\(user), \(code.codeHash), \(code.expiresAt.millisecondsSince1970), \(nowMs))
                """)
        }
        if let code = writes.newEmailAction {
            try await execute(
                """
                INSERT INTO email_actions (purpose, user_id, code_hash, email, email_normalized, from_email_normalized, previous_verified, expires_at, created_at)
                VALUES (\(code.purpose.rawValue), \(user), \(code.codeHash), \(code.email), \(code.emailNormalized), \(code.fromEmailNormalized),
                    \(code.previousVerified), \(code.expiresAt.millisecondsSince1970), \(nowMs))
                """)
        }
        if let mail = writes.mail { try await enqueue(mail, on: connection, at: now, wake: wake, logger: logger) }
    }
}
