import Logging
import PostgresNIO
import PostgresSupport

/// Leadership by a PostgreSQL session advisory lock (`LeaderElection` of both stores): the lock of
/// a job's name is taken with `pg_try_advisory_lock` on a connection of its own, held while the
/// job runs and released after it, whatever the job does. An instance that dies loses it with its
/// connection, so another takes the next pass.
struct AdvisoryLead: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// The store's name in log lines ("token store").
    let label: String
    let queryLogger = Logger(label: "gatehouse.postgres.lead", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Runs `body` if the lock of `name` is free; whether it ran. Errors of `body` pass through
    /// unchanged; the store's own errors go through `translate`.
    func runIfLeader(
        _ name: String, translate: (any Error) -> any Error, _ body: @escaping @Sendable () async throws -> Void
    ) async throws -> Bool {
        let key = Self.lockKey(name)
        do {
            return try await client.withConnection { connection in
                // A statement on a connection a crash closed would wait forever (`failingOnClose`).
                let rows = try await connection.failingOnClose {
                    try await connection.query("SELECT pg_try_advisory_lock(\(key))", logger: queryLogger).collect()
                }
                guard try rows.first?.decode(Bool.self) ?? false else { return false }
                do {
                    try await body()
                } catch {
                    await release(key, on: connection)
                    throw BodyError(error: error)
                }
                await release(key, on: connection)
                return true
            }
        } catch let error as BodyError {
            throw error.error
        } catch {
            throw translate(error)
        }
    }

    /// An error of the body, carried past the translation of the store's own errors.
    private struct BodyError: Error {
        let error: any Error
    }

    /// Releases the lead; if that fails, closes the connection, which ends the lock with it
    /// (never back in the pool still holding it).
    private func release(_ key: Int64, on connection: PostgresConnection) async {
        do {
            let rows = try await connection.failingOnClose {
                try await connection.query("SELECT pg_advisory_unlock(\(key))", logger: queryLogger).collect()
            }
            if try rows.first?.decode(Bool.self) == true { return }
            logger.error("\(label): the lead of a job was not held at its release")
        } catch {
            logger.warning("\(label): cannot release the lead of a job (\(PostgresTokenStore.describe(error))); closing its connection")
        }
        try? await connection.close()
    }

    /// A stable 63-bit key for an advisory lock named `name` (FNV-1a, as `PostgresMigrator`'s).
    static func lockKey(_ name: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash & 0x7fff_ffff_ffff_ffff)
    }
}
