import Logging
import PostgresNIO

extension PostgresConnection {
    /// Runs `body` between `begin` and COMMIT on this connection; a throw rolls back (the ROLLBACK's
    /// own failure is ignored: the connection then goes with its error) and passes through.
    func inTransaction<T>(_ begin: PostgresQuery = "BEGIN", logger: Logger, _ body: () async throws -> T) async throws -> T {
        try await query(begin, logger: logger)
        do {
            let result = try await body()
            try await query("COMMIT", logger: logger)
            return result
        } catch {
            _ = try? await query("ROLLBACK", logger: logger)
            throw error
        }
    }
}
