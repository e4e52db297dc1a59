import Foundation
import GRDB
import IdentityCore

extension SQLiteUserStore {
    /// Deletes the user and its linked identities in one statement, only while it is anonymous:
    /// a migration never deletes a user who was upgraded meanwhile. `userNotFound` otherwise.
    public func deleteAnonymous(id: UserID) async throws {
        try await run { db in
            let statement = try db.cachedStatement(sql: "DELETE FROM users WHERE id = ? AND isAnonymous = 1")
            try statement.execute(arguments: [id.rawValue])
            guard db.changesCount == 1 else { throw IdentityError.userNotFound }
        }
    }
}
