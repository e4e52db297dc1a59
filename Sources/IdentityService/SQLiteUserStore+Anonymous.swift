import Foundation
import GRDB
import IdentityCore

extension SQLiteUserStore {
    /// Deletes the user and its linked identities in one statement, only while it is anonymous:
    /// a migration never deletes a user who was upgraded meanwhile. `userNotFound` otherwise.
    public func deleteAnonymous(id: UserID) async throws {
        try await run { db in
            // As every deletion: the freed bytes are overwritten in the file, not only unlinked.
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            let statement = try db.cachedStatement(sql: "DELETE FROM users WHERE id = ? AND isAnonymous = 1")
            try statement.execute(arguments: [id.rawValue])
            guard db.changesCount == 1 else { throw IdentityError.userNotFound }
        }
    }
}
