import Logging
import PostgresNIO

/// Versioned, forward-only schema migrations for a PostgreSQL store (issue 24), applied once
/// however many instances start at the same moment: the migrator holds a session advisory lock
/// (`pg_advisory_lock`, one key per store) on one connection while it reads
/// `gatehouse_migrations` and applies, each in its own transaction with its row, the migrations
/// that table does not list yet. A migration that fails rolls back alone: the ones before it stay
/// applied and the next start tries it again.
public struct PostgresMigrator: Sendable {
    /// One migration: a stable id (never edit one that has shipped: add the next) and its
    /// statements, one a string (the extended protocol takes one statement a query).
    public struct Migration: Sendable, Equatable {
        /// The migration's id, e.g. `0001-users`.
        public var id: String
        /// Its statements, run in order in one transaction.
        public var statements: [String]

        /// A migration `id` of `statements`.
        public init(_ id: String, _ statements: [String]) {
            self.id = id
            self.statements = statements
        }
    }

    /// The store the migrations are for (`identity`, `token`): its lock key and its rows.
    public let store: String
    /// The migrations, in order.
    public let migrations: [Migration]

    /// A migrator of `store`'s `migrations`.
    public init(store: String, migrations: [Migration]) {
        self.store = store
        self.migrations = migrations
    }

    /// The advisory lock's key: a stable 63-bit hash of the store's name (FNV-1a).
    var lockKey: Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "gatehouse.migrations.\(store)".utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash & 0x7fff_ffff_ffff_ffff)
    }

    /// Applies what is missing; returns the ids applied by this call (none when another instance
    /// applied them first).
    @discardableResult
    public func migrate(_ client: PostgresClient, logger: Logger) async throws -> [String] {
        let key = lockKey
        return try await client.withConnection { connection in try await connection.failingOnClose {
            // A migration may take longer, and wait for another instance's longer, than the
            // limits every connection starts with (`PostgresSettings.clientConfiguration`): none
            // here, restored before the connection goes back to the pool.
            try await connection.query("SET statement_timeout = 0", logger: logger)
            try await connection.query("SET lock_timeout = 0", logger: logger)
            try await connection.query("SELECT pg_advisory_lock(\(key))", logger: logger)
            do {
                let applied = try await migrateLocked(connection, logger: logger)
                try await connection.query("SELECT pg_advisory_unlock(\(key))", logger: logger)
                try await connection.query("RESET statement_timeout", logger: logger)
                try await connection.query("RESET lock_timeout", logger: logger)
                return applied
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(key))", logger: logger)
                _ = try? await connection.query("RESET statement_timeout", logger: logger)
                _ = try? await connection.query("RESET lock_timeout", logger: logger)
                throw error
            }
        } }
    }

    private func createMigrationsTable(_ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS gatehouse_migrations (
                store TEXT NOT NULL, id TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                PRIMARY KEY (store, id))
            """, logger: logger)
    }

    private func migrateLocked(_ connection: PostgresConnection, logger: Logger) async throws -> [String] {
        do {
            try await createMigrationsTable(connection, logger: logger)
        } catch let error as PSQLError where ["23505", "42P07"].contains(error.serverInfo?[.sqlState] ?? "") {
            // Another store's migrator made it at the same moment (IF NOT EXISTS is not safe
            // under concurrency; the locks are per store): it exists now.
        }
        var done = Set<String>()
        for try await id in try await connection.query(
            "SELECT id FROM gatehouse_migrations WHERE store = \(store)", logger: logger
        ).decode(String.self) {
            done.insert(id)
        }
        var applied: [String] = []
        for migration in migrations where !done.contains(migration.id) {
            try await connection.query("BEGIN", logger: logger)
            do {
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    "INSERT INTO gatehouse_migrations (store, id) VALUES (\(store), \(migration.id))", logger: logger)
                try await connection.query("COMMIT", logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw PostgresMigrationError(store: store, id: migration.id, cause: String(reflecting: error))
            }
            logger.notice("applied migration \(migration.id) of the \(store) store")
            applied.append(migration.id)
        }
        return applied
    }
}

/// A migration that failed (rolled back; the ones before it stay applied).
public struct PostgresMigrationError: Error, CustomStringConvertible, Sendable {
    /// The store.
    public let store: String
    /// The migration that failed.
    public let id: String
    /// What PostgreSQL said.
    public let cause: String

    /// The store, the migration, and the cause.
    public var description: String { "migration \(id) of the \(store) store failed (rolled back): \(cause)" }
}
