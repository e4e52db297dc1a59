import GatehouseTestSupport
import Foundation
@testable import SQLiteStores
import IdentityPorts
import GRDB
import IdentityCore
@testable import IdentityService
import Testing

/// The look-up by normalized email that sign-in (and sign-up's early check) runs must search the
/// UNIQUE index on `users.emailNormalized`, not scan the table.
@Suite struct QueryPlanTests {
    @Test func lookupByNormalizedEmailSearchesTheUniqueIndex() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        // A real file, migrated by the store itself, with some rows and fresh statistics so the
        // planner is not choosing on an empty table.
        let store = try await dir.migratedStore()
        for i in 0..<200 { try await store.insert(try makeUser("plan\(i)@example.com")) }
        let found = try await store.user(normalizedEmail: "plan7@example.com")
        #expect(found?.emailNormalized == "plan7@example.com")

        let queue = try DatabaseQueue(path: dir.databasePath)
        let (plan, uniqueIndexes) = try await queue.write { db -> ([String], [String]) in
            try db.execute(sql: "ANALYZE")
            let plan = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + SQLiteUserStore.rawSelectByEmailSQL, arguments: ["plan7@example.com"])
                .map { $0["detail"] as String }
            // The index SQLite made for the column's UNIQUE constraint.
            let indexes = try Row.fetchAll(db, sql: "PRAGMA index_list(users)")
                .filter { ($0["unique"] as Int) == 1 && ($0["origin"] as String) == "u" }
                .map { $0["name"] as String }
                .filter { name in
                    let columns = (try? Row.fetchAll(db, sql: "PRAGMA index_info(\(name.quotedDatabaseIdentifier))").map { $0["name"] as String }) ?? []
                    return columns == ["email_normalized"]
                }
            return (plan, indexes)
        }
        #expect(uniqueIndexes.count == 1, "expected one UNIQUE index on email_normalized, found \(uniqueIndexes)")
        let index = try #require(uniqueIndexes.first)
        #expect(plan.count == 1, "\(plan)")
        let detail = try #require(plan.first)
        #expect(detail.hasPrefix("SEARCH users USING INDEX \(index) (email_normalized=?)"), "plan: \(plan)")
        #expect(!plan.contains { $0.hasPrefix("SCAN") }, "plan: \(plan)")
    }
}
