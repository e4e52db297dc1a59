import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseTestSupport
import GRDB
import IdentityCore
@testable import IdentityService
import Logging
import PostgresNIO
@testable import PostgresStores
import PostgresSupport
import Testing

// Raw access to the database under a mail suite's store (issue 24), for the few checks that look
// past the `IdentityStorage` contract (only hashes are stored, a refused write, a broken row):
// each takes the SQL for SQLite (camelCase columns) and for PostgreSQL (snake_case).

/// The store as `IdentityStorage` (SQLite or PostgreSQL).
func identityStorage(_ store: any IdentityStorage) -> any IdentityStorage { store }

/// Runs `sqlite` or the `postgres` statements (ones that return nothing) on the store's database.
func rawExecute(_ store: any UserStore, sqlite: String, postgres: [String]) async throws {
    switch store {
    case let store as SQLiteUserStore:
        try await store.run { db in try db.execute(sql: sqlite) }
    case let store as PostgresUserStore:
        for statement in postgres {
            _ = try await store.client.query(PostgresQuery(unsafeSQL: statement), logger: store.queryLogger).collect()
        }
    default:
        Issue.record("no raw access to \(type(of: store))")
    }
}

/// The first column of every row `sqlite` or `postgres` gives, as text (NULL as "NULL").
func rawStrings(_ store: any UserStore, sqlite: String, postgres: String) async throws -> [String] {
    switch store {
    case let store as SQLiteUserStore:
        return try await store.read { db in try Row.fetchAll(db, sql: sqlite).map { ($0[0] as String?) ?? "NULL" } }
    case let store as PostgresUserStore:
        return try await store.client.query(PostgresQuery(unsafeSQL: postgres), logger: store.queryLogger).collect()
            .map { try $0.decode(String?.self) ?? "NULL" }
    default:
        Issue.record("no raw access to \(type(of: store))")
        return []
    }
}

/// The stored code hashes of `table` (`password_resets` or `email_actions`), in id order.
func rawCodeHashes(_ store: any UserStore, table: String) async throws -> [Data] {
    switch store {
    case let store as SQLiteUserStore:
        return try await store.read { db in try Data.fetchAll(db, sql: "SELECT code_hash FROM \(table) ORDER BY id") }
    case let store as PostgresUserStore:
        return try await store.client.query(
            PostgresQuery(unsafeSQL: "SELECT code_hash FROM \(table) ORDER BY id"), logger: store.queryLogger
        ).collect().map { try $0.decode(Data.self) }
    default:
        Issue.record("no raw access to \(type(of: store))")
        return []
    }
}

