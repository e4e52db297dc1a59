import Foundation
import GatehouseTestSupport
import Logging
import PostgresNIO
import PostgresSupport
import Testing

/// `DatabaseHealth`: calls fail fast while the database does not answer, and work again on their
/// own once it does (issue 24 §3).
@Suite struct DatabaseHealthTests {
    @Test("a database that crashes: the first call fails unavailable after the stall limit, not at the pool's minute; later calls at once; a call runs again once it answers")
    func failsFastAndRecovers() async throws {
        let server = try await PostgresServer.start()
        let (client, running) = try Self.client(of: server, connections: 4)
        defer { running.cancel() }
        let health = DatabaseHealth(client: client, name: "test", logger: PostgresMigratorTests.poolLogger, probeInterval: .milliseconds(50))
        let select: @Sendable (PostgresConnection) async throws -> Int = { connection in
            try await connection.query("SELECT 1", logger: PostgresMigratorTests.poolLogger).collect().count
        }
        #expect(try await health.run({ _ in false }, select) == 1)
        await server.crash()
        let started = ContinuousClock.now
        await #expect(throws: DatabaseHealth.Unavailable.self) {
            // The pool notices the lost connections on this call or waits for a new one: either
            // way the call ends well before the pool's own circuit breaker (60 s).
            _ = try await health.run({ error in error is PSQLError }, select)
            _ = try await health.run({ error in error is PSQLError }, select)
        }
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(health.isDown)
        await #expect(throws: DatabaseHealth.Unavailable.self) { _ = try await health.run({ _ in false }, select) }
        try await server.startAgain()
        try await waitUntil("the database answering again") { !health.isDown }
        #expect(try await health.run({ _ in false }, select) == 1)
        await server.stop()
    }

    @Test("one statement's failure (a statement time-out, a division by zero) passes through and leaves the database up")
    func statementFailuresPassThrough() async throws {
        let server = try await PostgresServer.shared()
        let (client, running) = try Self.client(of: server, connections: 2)
        defer { running.cancel() }
        let health = DatabaseHealth(client: client, name: "test", logger: PostgresMigratorTests.poolLogger)
        let logger = PostgresMigratorTests.poolLogger
        // What the token store counts as a connection failure: none of these is.
        let isConnectionFailure: @Sendable (any Error) -> Bool = { error in
            guard let error = error as? PSQLError, error.code == .server else { return true }
            return false
        }
        await #expect(throws: PSQLError.self) {
            try await health.run(isConnectionFailure) { connection in
                _ = try await connection.query("SET statement_timeout = 50", logger: logger).collect()
                return try await connection.query("SELECT pg_sleep(1)", logger: logger).collect().count
            }
        }
        await #expect(throws: PSQLError.self) {
            try await health.run(isConnectionFailure) { connection in
                try await connection.query("SELECT 1 / 0", logger: logger).collect().count
            }
        }
        #expect(!health.isDown)
        #expect(try await health.run(isConnectionFailure) { connection in
            _ = try await connection.query("RESET statement_timeout", logger: logger).collect()
            return try await connection.query("SELECT 1", logger: logger).collect().count
        } == 1)
    }

    @Test("a call whose connection closes under it is given up, not left waiting forever: postgres-nio drops a statement written to a closed connection without answering it (the pool can lease one a crash has just closed)")
    func callOnClosedConnectionIsGivenUp() async throws {
        let server = try await PostgresServer.shared()
        let (client, running) = try Self.client(of: server, connections: 2)
        defer { running.cancel() }
        let health = DatabaseHealth(client: client, name: "test", logger: PostgresMigratorTests.poolLogger, closedGrace: .milliseconds(100))
        let logger = PostgresMigratorTests.poolLogger
        let started = ContinuousClock.now
        await #expect(throws: DatabaseHealth.Unavailable.self) {
            try await health.run({ _ in false }) { connection in
                try await connection.close()
                // Without the health's watch this never returns.
                return try await connection.query("SELECT 1", logger: logger).collect().count
            }
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        // One lost connection is not an outage: the next call runs.
        #expect(try await health.run({ _ in false }) { connection in
            try await connection.query("SELECT 1", logger: logger).collect().count
        } == 1)
    }

    @Test("failingOnClose: a statement on a connection that closed ends with ClosedUnderCall instead of waiting forever; on an open one it answers")
    func failingOnClose() async throws {
        let server = try await PostgresServer.shared()
        let (client, running) = try Self.client(of: server, connections: 2)
        defer { running.cancel() }
        let logger = PostgresMigratorTests.poolLogger
        let answered = try await client.withConnection { connection in
            try await connection.failingOnClose { try await connection.query("SELECT 1", logger: logger).collect().count }
        }
        #expect(answered == 1)
        await #expect(throws: PostgresConnection.ClosedUnderCall.self) {
            try await client.withConnection { connection in
                try await connection.close()
                return try await connection.failingOnClose(grace: .milliseconds(50)) {
                    try await connection.query("SELECT 1", logger: logger).collect().count
                }
            }
        }
    }

    /// A pool of `connections` on `server`'s `postgres` database, running until the task is cancelled.
    static func client(of server: PostgresServer, connections: Int) throws -> (PostgresClient, Task<Void, Never>) {
        let settings = try PostgresSettings(url: server.url(database: "postgres"))
        let client = PostgresClient(
            configuration: try settings.clientConfiguration(maximumConnections: connections), backgroundLogger: PostgresMigratorTests.poolLogger)
        return (client, Task { await client.run() })
    }
}
