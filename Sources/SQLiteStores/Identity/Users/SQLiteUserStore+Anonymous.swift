import Foundation
import Mail
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
import GRDB
import IdentityCore

extension SQLiteUserStore {
    /// Deletes the user and its linked identities in one statement, only while it is anonymous:
    /// a migration never deletes a user who was upgraded meanwhile. `userNotFound` otherwise.
    public func deleteAnonymous(id: UserID) async throws {
        guard try await deleteUserRow(sql: "DELETE FROM users WHERE id = ? AND is_anonymous = 1", [id.rawValue]) else {
            throw IdentityError.userNotFound
        }
    }

    /// Runs `sql`, a `DELETE` of at most one users row (its identities cascade), with SQLite's
    /// `secure_delete` on, so the freed bytes are overwritten in the file and not only unlinked,
    /// as for every deletion of a user. Whether a row was deleted. `then` runs after a deletion,
    /// in the same transaction.
    func deleteUserRow(
        sql: String, _ arguments: StatementArguments, then: (@Sendable (Database) throws -> Void)? = nil
    ) async throws -> Bool {
        let audit = AuditScope.current
        return try await run { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            try db.cachedStatement(sql: sql).execute(arguments: arguments)
            guard db.changesCount == 1 else {
                audit?.discard()  // nothing was deleted: no event for it
                return false
            }
            try then?(db)
            return true
        }
    }
}
