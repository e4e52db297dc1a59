import Foundation
import GatehouseContracts
import IdentityPorts
import GatehouseSupport
import GRDB
import IdentityCore
import Mail

// What the mail-code flows read for their decisions (`MailCodeRules`), and the application of
// the `MailCodeWrites` a decision returns, in the caller's transaction.
extension SQLiteUserStore {
    // MARK: Reads

    /// What the decisions need of the user `id`, or nil when there is none.
    static func mailCodeUser(_ id: UserID, in db: Database) throws -> MailCodeUser? {
        try Row.fetchOne(db.cachedStatement(sql: selectByIDSQL), arguments: [id.rawValue]).map { MailCodeUser(record($0)) }
    }

    /// The reset row with this code hash, in any state, or nil.
    static func storedResetCode(_ codeHash: Data, in db: Database) throws -> StoredResetCode? {
        try Row.fetchOne(db, sql: "SELECT id, user_id, expires_at, used_at FROM password_resets WHERE code_hash = ?", arguments: [codeHash])
            .map { StoredResetCode(id: $0[0], userID: UserID($0[1] as String), expiresAt: $0[2], usedAt: $0[3]) }
    }

    /// The email action row with this code hash, in any state, or nil.
    static func storedEmailAction(_ codeHash: Data, in db: Database) throws -> StoredEmailAction? {
        guard let row = try Row.fetchOne(
            db, sql: """
                SELECT id, purpose, user_id, email, email_normalized, from_email_normalized, previous_verified, expires_at, used_at
                FROM email_actions WHERE code_hash = ?
                """, arguments: [codeHash]),
            let purpose = EmailActionPurpose(rawValue: row[1])
        else { return nil }
        return StoredEmailAction(
            id: row[0], purpose: purpose, userID: UserID(row[2] as String), email: row[3], emailNormalized: row[4],
            fromEmailNormalized: row[5], previousVerified: (row[6] as Int64) != 0, expiresAt: row[7], usedAt: row[8])
    }

    /// The creation times of the user's reset codes made after `MailCodeRules.recentSince(now)`.
    static func recentResetTimes(_ userID: UserID, now: Date, in db: Database) throws -> [Int64] {
        try Int64.fetchAll(
            db, sql: "SELECT created_at FROM password_resets WHERE user_id = ? AND created_at > ? ORDER BY created_at",
            arguments: [userID.rawValue, MailCodeRules.recentSince(now)])
    }

    /// The creation times of the user's `purpose` codes made after `MailCodeRules.recentSince(now)`.
    static func recentEmailActionTimes(_ userID: UserID, _ purpose: EmailActionPurpose, now: Date, in db: Database) throws -> [Int64] {
        try Int64.fetchAll(
            db, sql: "SELECT created_at FROM email_actions WHERE user_id = ? AND purpose = ? AND created_at > ? ORDER BY created_at",
            arguments: [userID.rawValue, purpose.rawValue, MailCodeRules.recentSince(now)])
    }

    // MARK: Application

    /// Writes `writes` at `now`, part by part in the order `MailCodeWrites` gives. The address
    /// reservation needs no step here: the `email_reserved` triggers check it in this (the only)
    /// writer's transaction.
    static func apply(_ writes: MailCodeWrites<MailMessage>, at now: Date, in db: Database) throws {
        let nowMs = now.millisecondsSince1970
        let user = writes.userID.rawValue
        if let before = writes.purgeResetsCreatedBefore {
            try db.execute(sql: "DELETE FROM password_resets WHERE user_id = ? AND created_at < ?", arguments: [user, before])
        }
        if let address = writes.newAddress {
            try db.execute(
                sql: "UPDATE users SET email = ?, email_normalized = ?, email_verified = 1, version = version + 1, updated_at = ? WHERE id = ?",
                arguments: [address.email, address.emailNormalized, nowMs, user])
        }
        if let id = writes.useResetCode {
            try db.execute(sql: "UPDATE password_resets SET used_at = ? WHERE id = ?", arguments: [nowMs, id])
        }
        if let id = writes.useEmailAction {
            try db.execute(sql: "UPDATE email_actions SET used_at = ? WHERE id = ?", arguments: [nowMs, id])
        }
        if writes.voidResets {
            try db.execute(sql: "UPDATE password_resets SET used_at = ? WHERE user_id = ? AND used_at IS NULL", arguments: [nowMs, user])
        }
        try voidEmailActions(userID: user, purposes: writes.voidEmailActions, at: nowMs, in: db)
        if let after = writes.voidRevertCodesAfter {
            try db.execute(
                sql: "UPDATE email_actions SET used_at = ? WHERE user_id = ? AND purpose = ? AND used_at IS NULL AND id > ?",
                arguments: [nowMs, user, EmailActionPurpose.revertEmail.rawValue, after])
        }
        switch writes.password {
        case .reset(let hash):
            try db.execute(
                sql: "UPDATE users SET password_hash = ?, email_verified = 1, version = version + 1, updated_at = ? WHERE id = ?",
                arguments: [hash, nowMs, user])
        case .clear:
            try db.execute(sql: "UPDATE users SET password_hash = NULL WHERE id = ?", arguments: [user])
        case nil:
            break
        }
        if let code = writes.newResetCode {
            try db.execute(
                sql: "INSERT INTO password_resets (user_id, code_hash, expires_at, created_at) VALUES (?, ?, ?, ?)",
                arguments: [user, code.codeHash, code.expiresAt.millisecondsSince1970, nowMs])
        }
        if let code = writes.newEmailAction {
            try db.execute(
                sql: """
                    INSERT INTO email_actions (purpose, user_id, code_hash, email, email_normalized, from_email_normalized, previous_verified, expires_at, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    code.purpose.rawValue, user, code.codeHash, code.email, code.emailNormalized, code.fromEmailNormalized,
                    code.previousVerified ? 1 : 0, code.expiresAt.millisecondsSince1970, nowMs,
                ])
        }
        if let mail = writes.mail { try enqueue(mail, in: db, at: now) }
    }
}
