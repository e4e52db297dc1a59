import Foundation
import Mail
import GatehouseContracts
import IdentityPorts
import GatehouseSupport
import GRDB
import IdentityCore

extension SQLiteUserStore: AnonymousSweepStore {
    // MARK: The sweep of inactive anonymous users

    /// A user's known activity, as SQL: the expression of the partial index
    /// `users_anonymous_activity` (a query must spell it the same way to use the index).
    static let activitySQL = "max(createdAt, coalesce(lastSignInAt, 0), coalesce(sessionActivityAt, 0))"

    /// Migration 0003: the session activity the sweep learned of (`sessionActivityAt`, written
    /// only by the sweep, never on refresh), and a partial index on the activity of anonymous
    /// users, so finding the candidates reads only the inactive ones in order.
    static func registerAnonymousSweepMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0003-anonymous-sweep-index") { db in
            try db.execute(sql: """
                ALTER TABLE users ADD COLUMN sessionActivityAt INTEGER;
                CREATE INDEX users_anonymous_activity ON users(\(activitySQL)) WHERE isAnonymous = 1;
                """)
        }
    }

    // Internal (not private) so a test can check its query plan.
    static let anonymousCandidatesSQL = """
        SELECT id, \(activitySQL) AS activity FROM users
        WHERE isAnonymous = 1 AND \(activitySQL) < ? ORDER BY \(activitySQL) LIMIT ?
        """

    /// Anonymous users last active before `cutoff`, least recently active first, at most `limit`.
    public func anonymousCandidates(inactiveBefore cutoff: Date, limit: Int) async throws -> [AnonymousCandidate] {
        try await read { db in
            try Row.fetchAll(db, sql: Self.anonymousCandidatesSQL, arguments: [cutoff.millisecondsSince1970, max(0, limit)]).map { row in
                AnonymousCandidate(id: UserID(rawValue: row["id"]), lastActivity: Date(millisecondsSince1970: row["activity"]))
            }
        }
    }

    /// Keeps the later of the stored session activity and the one learned, in one transaction.
    public func recordSessionActivity(_ activity: [UserID: Date]) async throws {
        guard !activity.isEmpty else { return }
        try await run { db in
            let statement = try db.cachedStatement(sql: """
                UPDATE users SET sessionActivityAt = max(coalesce(sessionActivityAt, 0), ?) WHERE id = ?
                """)
            for (id, at) in activity { try statement.execute(arguments: [at.millisecondsSince1970, id.rawValue]) }
        }
    }

    /// Deletes the user if it is still anonymous and inactive since before `cutoff`.
    public func deleteAnonymous(id: UserID, inactiveBefore cutoff: Date) async throws -> Bool {
        try await deleteUserRow(
            sql: "DELETE FROM users WHERE id = ? AND isAnonymous = 1 AND \(Self.activitySQL) < ?",
            [id.rawValue, cutoff.millisecondsSince1970])
    }
}
