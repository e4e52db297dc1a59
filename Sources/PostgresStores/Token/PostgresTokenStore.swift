import Foundation
import TokenPorts
import GatehouseContracts
import GatehouseSupport
import Logging
import PostgresNIO
import PostgresSupport
import Synchronization
import TokenCore

/// The token service's store on PostgreSQL (issue 24), for several token-service instances on
/// one database: the observable behaviour of SQLite's `SQLiteTokenStore` (the same rotation outcomes,
/// audit events, sweep rules and orders), made safe under concurrent instances.
///
/// - A rotation locks its session row (`SELECT … FOR UPDATE`) in the statement that rotates, so
///   of two rotations of one token, wherever they run, one rotates and the other finds the
///   session on the successor (a grace replay, or reuse as SQLite would decide it).
/// - Every revoking write draws its numbers from one counter row (`token_revocation_counter`) in
///   its own transaction and keeps one `token_revocation_event` per session: the row lock
///   serialises revocations, so they commit in the order of their numbers and any instance can
///   publish all of them (`SharedRevocationLog`). The audit log's `seq` comes from the same row,
///   so it too is gap-free and in commit order, as SQLite's single writer gives it.
/// - A first key, a new key, a stored secret and the feed's epoch are agreed when instances race.
/// - Background jobs run on one instance at a time (`runIfLeader`, a session advisory lock).
///
/// Times are milliseconds (BIGINT), as SQLite stores them; every statement is parameterized. No
/// error of postgres-nio leaves the store: a connection failure or time-out is
/// `RPCError(.unavailable)`, anything else is logged (without values) and `RPCError(.internal)`.
public final class PostgresTokenStore: SharedRevocationLog {
    let client: PostgresClient
    let logger: Logger
    /// postgres-nio's own query logging stays off: at trace level it prints rows and binds
    /// (refresh-token hashes, sealed keys); the store logs its failures itself.
    let queryLogger = Logger(label: "gatehouse.token.postgres.query", factory: { _ in SwiftLogNoOpLogHandler() })
    /// The feed's epoch once read (it never changes).
    let epoch = Mutex<String?>(nil)
    /// Whether the database answers: calls fail at once while it does not.
    let health: DatabaseHealth

    /// A store over `client` (run by its owner, with at least two connections: `runIfLeader`
    /// holds one while its job runs); call `migrate()` before use.
    public init(client: PostgresClient, logger: Logger = Logger(label: "gatehouse.token.postgres")) {
        self.client = client
        self.logger = logger
        health = DatabaseHealth(client: client, name: "token", logger: logger)
    }

    /// Applies the migrations not applied yet (once, whatever other instances do meanwhile).
    public func migrate() async throws {
        do { try await Self.migrator.migrate(client, logger: logger) } catch { throw translate(error) }
    }

    /// Several instances share it: the database numbers every instance's revocations.
    public var sharedRevocationLog: (any SharedRevocationLog)? { self }

    // MARK: Leader election

    /// Runs `body` if this instance takes the session advisory lock of `job` (a key derived from
    /// "gatehouse.token." + job; `AdvisoryLead`); whether it ran. Errors of `body` pass through
    /// unchanged.
    public func runIfLeader(_ job: String, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        try await AdvisoryLead(client: client, logger: logger, label: "token store")
            .runIfLeader("gatehouse.token." + job, translate: translate, body)
    }

    /// A stable 63-bit key for an advisory lock named `name` (`AdvisoryLead.lockKey`).
    static func lockKey(_ name: String) -> Int64 { AdvisoryLead.lockKey(name) }

    // MARK: Access

    /// Runs `query` on `connection` to its end and returns its rows. Always to the end: postgres-nio
    /// hands over a result's rows before the statement completes, and an error (or, for a
    /// statement of its own, a failed commit) arrives after them.
    @discardableResult
    /// A failure names the caller's file and line (`describe`).
    func rows(
        _ query: PostgresQuery, on connection: PostgresConnection, file: String = #fileID, line: Int = #line
    ) async throws -> [PostgresRow] {
        try await connection.query(query, logger: queryLogger, file: file, line: line).collect()
    }

    /// Runs `body` on a pooled connection (each statement its own transaction); errors
    /// translated. A deadlock the server broke (every statement rolled back) is tried again.
    ///
    /// While the database does not answer (`DatabaseHealth`), fails at once with `unavailable`
    /// instead of waiting for a connection the pool cannot make; a call stalled on it is cancelled.
    @discardableResult
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await health.run(Self.isConnectionFailure, body)
            } catch let error as PSQLError where Self.sqlState(error) == "40P01" && attempt < 3 {
                attempt += 1
                logger.notice("token store: deadlock broken by the server; trying again")
            } catch is DatabaseHealth.Unavailable {
                throw Self.unavailable
            } catch {
                throw translate(error)
            }
        }
    }

    /// What a call answers while the database does not.
    static let unavailable = RPCError(.unavailable, "the token database is unavailable")

    /// Runs `body` in a transaction (READ COMMITTED), rolled back when it throws; errors translated.
    @discardableResult
    func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await run { [self] connection in
            try await connection.inTransaction(logger: queryLogger) { try await body(connection) }
        }
    }

    static func sqlState(_ error: PSQLError) -> String? { error.serverInfo?[.sqlState] }

    /// The server's SQLSTATEs of an unreachable, overloaded or shutting-down server, or of a
    /// statement or lock time-out.
    static let unavailableStates: Set<String> = ["57P01", "57P02", "57P03", "53300", "53400", "57014", "55P03", "40P01"]

    /// Whether `error` means no connection to the database could be had or kept: the database is
    /// down or unreachable, not one statement's failure (a deadlock, a lock or statement time-out,
    /// a cancelled wait for a connection pass through). Marks the database down (`DatabaseHealth`).
    static func isConnectionFailure(_ error: any Error) -> Bool {
        if let error = error as? PSQLError {
            switch error.code {
            case .connectionError, .serverClosedConnection, .uncleanShutdown, .sslUnsupported, .failedToAddSSLHandler:
                return true
            case .server:
                guard let state = sqlState(error) else { return false }
                return state.hasPrefix("08") || ["57P01", "57P02", "57P03", "53300"].contains(state)
            default:
                return false
            }
        }
        // The pool's own error type is not public: its circuit breaker (no connection could be
        // made for a while) is a connection failure; a cancelled wait or a closed pool is not.
        if String(describing: type(of: error)) == "ConnectionPoolError" {
            return String(describing: error).contains("connectionCreationCircuitBreakerTripped")
        }
        return error is ChannelError || error is IOError
    }

    /// Whether `error` means the database cannot be reached (or answered too late) now.
    static func isUnavailable(_ error: any Error) -> Bool {
        if let error = error as? PSQLError {
            switch error.code {
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed,
                .queryCancelled, .sslUnsupported, .failedToAddSSLHandler:
                return true
            case .server:
                guard let state = sqlState(error) else { return false }
                return state.hasPrefix("08") || unavailableStates.contains(state)
            default:
                return false
            }
        }
        // The pool's own failures (its circuit breaker: no connection could be made) and NIO's.
        if String(describing: type(of: error)) == "ConnectionPoolError" { return true }
        return error is ChannelError || error is IOError
    }

    /// The store's errors as the `TokenStorage` contract gives them.
    func translate(_ error: any Error) -> any Error {
        if error is RPCError || error is TokenError || error is CancellationError || error is TokenCopyError { return error }
        if Task.isCancelled, let error = error as? PSQLError, error.code == .queryCancelled { return CancellationError() }
        if Self.isUnavailable(error) {
            logger.warning("token store: the database is unavailable: \(Self.describe(error))")
            return RPCError(.unavailable, "the token database is unavailable")
        }
        logger.error("token store: \(Self.describe(error))")
        return RPCError(.internal, "internal error")
    }

    /// What went wrong, without any value: no bind, no row, no server message or detail (they
    /// can quote values, and the values here are hashes, sealed keys and secrets).
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            var parts = ["PSQLError \(error.code)"]
            let fields: [(String, PSQLError.ServerInfo.Field)] = [
                ("sqlState", .sqlState), ("table", .tableName), ("column", .columnName), ("constraint", .constraintName),
                ("routine", .routine),
            ]
            for (name, field) in fields {
                if let value = error.serverInfo?[field] { parts.append("\(name) \(value)") }
            }
            if let file = error.file, let line = error.line { parts.append("at \(file):\(line)") }
            return parts.joined(separator: ", ")
        }
        if let error = error as? PostgresDecodingError {
            return "cannot decode column \(error.columnName) (\(error.postgresType)) as \(error.targetType) at \(error.file):\(error.line)"
        }
        if let error = error as? PostgresMigrationError {
            // Schema statements only: no value of a row in it.
            return error.description
        }
        return String(describing: type(of: error))
    }
}
