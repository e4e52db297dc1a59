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
    /// `users_anonymous_activity` (a query must spell it the same way to use the index; since
    /// migration 0015 renamed its columns, the index says it with these names).
    static let activitySQL = "max(created_at, coalesce(last_sign_in_at, 0), coalesce(session_activity_at, 0))"

    /// Migration 0003: the session activity the sweep learned of (`sessionActivityAt`, now
    /// `session_activity_at`: written only by the sweep, never on refresh), and a partial index
    /// on the activity of anonymous users, so finding the candidates reads only the inactive ones
    /// in order. Frozen with the column names of its time (0015 renamed them).
    static func registerAnonymousSweepMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0003-anonymous-sweep-index") { db in
            try db.execute(sql: """
                ALTER TABLE users ADD COLUMN sessionActivityAt INTEGER;
                CREATE INDEX users_anonymous_activity ON users(max(createdAt, coalesce(lastSignInAt, 0), coalesce(sessionActivityAt, 0))) WHERE isAnonymous = 1;
                """)
        }
    }

    // Internal (not private) so a test can check its query plan.
    static let anonymousCandidatesSQL = """
        SELECT id, \(activitySQL) AS activity FROM users
        WHERE is_anonymous = 1 AND \(activitySQL) < ? ORDER BY \(activitySQL) LIMIT ?
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
                UPDATE users SET session_activity_at = max(coalesce(session_activity_at, 0), ?) WHERE id = ?
                """)
            for (id, at) in activity { try statement.execute(arguments: [at.millisecondsSince1970, id.rawValue]) }
        }
    }

    /// Deletes the user if it is still anonymous and inactive since before `cutoff`.
    public func deleteAnonymous(id: UserID, inactiveBefore cutoff: Date) async throws -> Bool {
        try await deleteUserRow(
            sql: "DELETE FROM users WHERE id = ? AND is_anonymous = 1 AND \(Self.activitySQL) < ?",
            [id.rawValue, cutoff.millisecondsSince1970])
    }
}
