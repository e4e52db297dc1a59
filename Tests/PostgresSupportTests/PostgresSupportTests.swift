import Foundation
import GatehouseTestSupport
import Logging
import PostgresNIO
import PostgresSupport
import Testing

@Suite("PostgreSQL settings")
struct PostgresSettingsTests {
    @Test("a URL with user, password, port, database and sslmode; loopback defaults to no TLS, a remote host to verify-full")
    func parses() throws {
        let full = try PostgresSettings(url: "postgres://gh%40app:s%3Acret@db.example.com:6543/gatehouse?sslmode=require")
        #expect(full.host == "db.example.com")
        #expect(full.port == 6543)
        #expect(full.username == "gh@app")
        #expect(full.password == "s:cret")
        #expect(full.database == "gatehouse")
        #expect(full.tls == .require)
        #expect(!full.description.contains("s:cret") && !full.description.contains("cret"), "no password in the description")
        #expect(try PostgresSettings(url: "postgresql://u@127.0.0.1/db").tls == .disable)
        #expect(try PostgresSettings(url: "postgres://u@db.internal/db").tls == .verifyFull)
        #expect(try PostgresSettings(url: "postgres://u@db.internal/db").port == 5432)
        #expect(try PostgresSettings(url: "postgres://u:p%2541@h/db").password == "p%41", "decoded once")
    }

    @Test("the password file's first line replaces the URL's password; what cannot work is refused with what to fix")
    func passwordFileAndRefusals() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("gh-pgpass-\(UUID().uuidString)")
        try Data("from-file\nignored\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try PostgresSettings(url: "postgres://u:inline@h/db", passwordFile: file.path).password == "from-file")
        for bad in [
            "mysql://u@h/db", "postgres://h/db", "postgres://u@h", "postgres://u@h/", "postgres://u@h/db?sslmode=maybe",
            "postgres://u@h/db?application=x", "postgres://u@h:0/db", "not a url",
        ] {
            #expect(throws: PostgresSettingsError.self, "\(bad)") { try PostgresSettings(url: bad) }
        }
        #expect(throws: PostgresSettingsError.self) { try PostgresSettings(url: "postgres://u@h/db", passwordFile: "/nonexistent") }
    }
}

/// Migrations against a real PostgreSQL 15 server (initdb and pg_ctl in a temporary folder).
@Suite("PostgreSQL migrations against a real server")
struct PostgresMigratorTests {
    static let logger = Logger(label: "pg-tests")
    /// The pools' own logger: not their notice that a lease came before `run()` began.
    static let poolLogger: Logger = {
        var logger = Logger(label: "pg-tests-pool")
        logger.logLevel = .error
        return logger
    }()

    /// Runs `body` with clients made on demand for a fresh database of a fresh server.
    func withServer(_ body: (_ makeClient: () -> PostgresClient, _ run: (PostgresClient) -> Task<Void, Never>) async throws -> Void) async throws {
        let server = try await PostgresServer.start()
        do {
            let database = try await server.createDatabase()
            let settings = try PostgresSettings(url: server.url(database: database))
            var tasks: [Task<Void, Never>] = []
            try await body({ PostgresClient(configuration: try! settings.clientConfiguration(maximumConnections: 4), backgroundLogger: Self.poolLogger) }) { client in
                let task = Task { await client.run() }
                tasks.append(task)
                return task
            }
            for task in tasks { task.cancel() }
            for task in tasks { await task.value }
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    static let migrations = [
        PostgresMigrator.Migration("0001-counter", [
            "CREATE TABLE counter (n INTEGER NOT NULL)",
            "INSERT INTO counter (n) VALUES (1)",
        ]),
        PostgresMigrator.Migration("0002-bump", ["UPDATE counter SET n = n + 1"]),
    ]

    @Test("five instances migrating at the same moment apply each migration exactly once; a later run applies nothing")
    func concurrentMigratorsApplyOnce() async throws {
        try await withServer { makeClient, run in
            let clients = (0..<5).map { _ in makeClient() }
            for client in clients { _ = run(client) }
            let migrator = PostgresMigrator(store: "identity", migrations: Self.migrations)
            let applied = try await withThrowingTaskGroup(of: [String].self) { group in
                for client in clients { group.addTask { try await migrator.migrate(client, logger: Self.logger) } }
                var all: [[String]] = []
                for try await one in group { all.append(one) }
                return all
            }
            #expect(applied.flatMap { $0 }.sorted() == ["0001-counter", "0002-bump"], "each applied by exactly one instance: \(applied)")
            let n = try await clients[0].query("SELECT n FROM counter", logger: Self.logger).collect().first?.decode(Int.self)
            #expect(n == 2, "the bump ran once")
            #expect(try await migrator.migrate(clients[1], logger: Self.logger).isEmpty)
            // Another store's migrations are its own.
            let other = PostgresMigrator(store: "token", migrations: [.init("0001-counter", ["CREATE TABLE token_counter (n INTEGER)"])])
            #expect(try await other.migrate(clients[2], logger: Self.logger) == ["0001-counter"])
        }
    }

    @Test("two stores migrating at the same moment on a fresh database both succeed (they share gatehouse_migrations)")
    func twoStoresAtOnce() async throws {
        try await withServer { makeClient, run in
            for round in 0..<3 {
                let clients = (0..<4).map { _ in makeClient() }
                for client in clients { _ = run(client) }
                let stores = ["identity\(round)", "token\(round)", "identity\(round)", "token\(round)"]
                let applied = try await withThrowingTaskGroup(of: [String].self) { group in
                    for (client, store) in zip(clients, stores) {
                        let migrator = PostgresMigrator(store: store, migrations: [.init("0001-t", ["CREATE TABLE t_\(store) (n INTEGER)"])])
                        group.addTask { try await migrator.migrate(client, logger: Self.logger) }
                    }
                    var all: [[String]] = []
                    for try await one in group { all.append(one) }
                    return all
                }
                #expect(applied.flatMap { $0 }.count == 2, "each store's migration once: \(applied)")
                if round == 0 { break }  // the first round is the fresh database
            }
        }
    }

    @Test("a failing migration rolls back alone: the ones before it stay, the next run applies it once fixed")
    func failingMigrationRollsBack() async throws {
        try await withServer { makeClient, run in
            let client = makeClient()
            _ = run(client)
            let broken = PostgresMigrator(store: "identity", migrations: [
                Self.migrations[0],
                .init("0002-bump", ["UPDATE counter SET n = n + 1", "SELECT no_such_column FROM counter"]),
            ])
            await #expect(throws: PostgresMigrationError.self) { try await broken.migrate(client, logger: Self.logger) }
            let n = try await client.query("SELECT n FROM counter", logger: Self.logger).collect().first?.decode(Int.self)
            #expect(n == 1, "the failed migration's update rolled back")
            let fixed = PostgresMigrator(store: "identity", migrations: Self.migrations)
            #expect(try await fixed.migrate(client, logger: Self.logger) == ["0002-bump"])
        }
    }
}
