import Foundation
import GRDB
import TokenPorts

extension SQLiteTokenStore {
    // MARK: Activity

    /// For each of `userIDs` with at least one stored session, the latest `last_used_at` of its
    /// sessions (revoked and expired ones included). One read through the `session(user_id)`
    /// index; writes nothing.
    public func lastActivity(userIDs: [String]) async throws -> [String: Date] {
        guard !userIDs.isEmpty else { return [:] }
        let unique = Array(Set(userIDs))
        return try await read { db in
            let placeholders = Array(repeating: "?", count: unique.count).joined(separator: ", ")
            let rows = try Row.fetchAll(
                db, sql: "SELECT user_id, max(last_used_at) AS last_used_at FROM session WHERE user_id IN (\(placeholders)) GROUP BY user_id",
                arguments: StatementArguments(unique))
            var result: [String: Date] = [:]
            for row in rows {
                if let at = Self.date(row["last_used_at"]) { result[row["user_id"]] = at }
            }
            return result
        }
    }
}
