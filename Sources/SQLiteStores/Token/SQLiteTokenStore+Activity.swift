import Foundation
import GRDB
import TokenPorts

extension SQLiteTokenStore {
    // MARK: Activity

    /// For each of `userIDs` with at least one stored session, the latest `lastUsedAt` of its
    /// sessions (revoked and expired ones included). One read through the `session(userId)`
    /// index; writes nothing.
    public func lastActivity(userIDs: [String]) async throws -> [String: Date] {
        guard !userIDs.isEmpty else { return [:] }
        let unique = Array(Set(userIDs))
        return try await read { db in
            let placeholders = Array(repeating: "?", count: unique.count).joined(separator: ", ")
            let rows = try Row.fetchAll(
                db, sql: "SELECT userId, max(lastUsedAt) AS lastUsedAt FROM session WHERE userId IN (\(placeholders)) GROUP BY userId",
                arguments: StatementArguments(unique))
            var result: [String: Date] = [:]
            for row in rows {
                if let at = Self.date(row["lastUsedAt"]) { result[row["userId"]] = at }
            }
            return result
        }
    }
}
