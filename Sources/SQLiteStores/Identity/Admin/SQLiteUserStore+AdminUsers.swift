import Foundation
import Mail
import GatehouseContracts
import IdentityPorts
import GatehouseSupport
import GRDB
import IdentityCore
import Mail

// The admin API's reads and writes that no other path has (issue 22 §1): the filtered listing of
// users, and action codes stored for a link the operator hands over instead of a mail.
extension SQLiteUserStore {
    /// Up to `limit` users with an id after `afterID` ("" from the first) that pass `filter`, in
    /// id order, and whether more follow.
    public func users(filter: UserFilter, after afterID: String, limit: Int) async throws -> ([UserRecord], Bool) {
        var clauses = ["id > ?"]
        var arguments: StatementArguments = [afterID]
        if !filter.emailPrefix.isEmpty {
            // A range of the unique index: every address that starts with the prefix sorts in it.
            clauses.append("email_normalized >= ? AND email_normalized < ?")
            arguments += [filter.emailPrefix, filter.emailPrefix + "\u{10FFFF}"]
        }
        if filter.provider == "password" {
            clauses.append("password_hash IS NOT NULL")
        } else if !filter.provider.isEmpty {
            clauses.append("instr(',' || providers || ',', ',' || ? || ',') > 0")
            arguments += [filter.provider]
        }
        if let disabled = filter.disabled {
            clauses.append("disabled = ?")
            arguments += [disabled ? 1 : 0]
        }
        if let anonymous = filter.anonymous {
            clauses.append("is_anonymous = ?")
            arguments += [anonymous ? 1 : 0]
        }
        if let after = filter.createdAfter {
            clauses.append("created_at >= ?")
            arguments += [after.millisecondsSince1970]
        }
        if let before = filter.createdBefore {
            clauses.append("created_at < ?")
            arguments += [before.millisecondsSince1970]
        }
        arguments += [limit + 1]
        let bound = arguments
        let sql = Self.selectByIDSQL.replacingOccurrences(
            of: "WHERE id = ?", with: "WHERE \(clauses.joined(separator: " AND ")) ORDER BY id LIMIT ?")
        let rows = try await read { db in try Row.fetchAll(db.cachedStatement(sql: sql), arguments: bound).map(Self.record) }
        return (Array(rows.prefix(limit)), rows.count > limit)
    }

    /// Stores a `kind` code (its SHA-256) for `userID`, voiding the user's older codes of that
    /// kind, without a mail, in one transaction (`MailCodeRules.linkCode`); `userNotFound` when the
    /// user is gone, disabled, or no longer has the address `emailNormalized`.
    public func storeLinkCode(
        _ kind: LinkCodeKind, userID: UserID, email: String, emailNormalized: String, codeHash: Data, expiresAt: Date, now: Date
    ) async throws {
        try await run { db in
            let user = try Self.mailCodeUser(userID, in: db)
            let writes: MailCodeWrites<MailMessage> = try MailCodeRules.linkCode(
                kind, user: user, email: email, emailNormalized: emailNormalized, codeHash: codeHash, expiresAt: expiresAt)
            try Self.apply(writes, at: now, in: db)
        }
    }
}

extension SQLiteUserStore {
    /// `update`, and with `voidingCodes` in the same transaction the user's unused password reset
    /// codes and pending email changes and verifications voided (an operator's new address or
    /// password; `MailCodeRules.operatorChangedCredentials`). Revert codes stay: they are the
    /// previous address owner's way back.
    public func update(
        id: UserID, now: Date, voidingCodes: Bool, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await run { db in
            let user = try Self.update(id: id, expectedVersion: nil, now: now, in: db, change)
            if voidingCodes { try Self.apply(MailCodeRules.operatorChangedCredentials(userID: id), at: now, in: db) }
            return user
        }
    }
}
