import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseTestSupport
import GRDB
@testable import IdentityService
import Logging
import PostgresNIO
@testable import PostgresStores
import PostgresSupport
import SQLiteSupport
import Testing

// Helpers of the log suites (change log, audit log, sweep) that run over both kept stores.

extension Harness {
    /// The store as the whole identity storage.
    var logStorage: any IdentityStorage { store }

    /// Runs a raw statement on the harness's store: `sqlite` on SQLite's writer, `postgres` on a
    /// PostgreSQL connection (tests that corrupt or inspect a row).
    func executeRaw(sqlite: String, postgres: PostgresQuery) async throws {
        if let store = store as? SQLiteUserStore {
            try await store.files.pool.write { db in try db.execute(sql: sqlite) }
        } else if let store = store as? PostgresUserStore {
            _ = try await store.client.withConnection { connection in
                try await connection.query(postgres, logger: store.queryLogger)
            }
        } else {
            Issue.record("no raw access to \(type(of: store))")
        }
    }

    /// The strings of the first column of a raw query (`sqlite` or `postgres` by the store).
    func stringsRaw(sqlite: String, postgres: PostgresQuery) async throws -> [String] {
        if let store = store as? SQLiteUserStore {
            return try await store.read { db in try String.fetchAll(db, sql: sqlite) }
        } else if let store = store as? PostgresUserStore {
            return try await store.client.withConnection { connection in
                var values: [String] = []
                for try await value in try await connection.query(postgres, logger: store.queryLogger).decode(String.self) {
                    values.append(value)
                }
                return values
            }
        }
        Issue.record("no raw access to \(type(of: store))")
        return []
    }
}

/// Two `PostgresUserStore`s, each on a client of its own (two instances), over one fresh migrated
/// database, and what stops both clients.
func twoPostgresStores() async throws -> (PostgresUserStore, PostgresUserStore, cleanup: @Sendable () -> Void) {
    let server = try await PostgresServer.shared()
    let database = try await server.createDatabase()
    let settings = try PostgresSettings(url: server.url(database: database))
    var logger = Logger(label: "identity-tests.postgres")
    logger.logLevel = .error
    var stores: [PostgresUserStore] = []
    var tasks: [Task<Void, Never>] = []
    for _ in 0..<2 {
        let client = PostgresClient(configuration: try settings.clientConfiguration(maximumConnections: 6), backgroundLogger: logger)
        tasks.append(Task { await client.run() })
        stores.append(PostgresUserStore(client: client, logger: logger))
    }
    // Both migrate at once, as instances starting together do: the migrator lets one apply each.
    let (a, b) = (stores[0], stores[1])
    async let first: Void = a.migrate()
    async let second: Void = b.migrate()
    _ = try await (first, second)
    let running = tasks
    return (a, b, { for task in running { task.cancel() } })
}
