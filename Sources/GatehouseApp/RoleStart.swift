import Foundation
import GatehouseRPC
import Logging
import PostgresNIO
import PostgresSupport
import RPCRouting
import ZeroMQ

/// The one start-up path the three roles share: their links' warnings logged, RPC clients made
/// with the link's CURVE keys and the configured timeout, and (for the two services) the data
/// folder created, the event publisher bound, the store opened (SQLite or PostgreSQL) and the RPC
/// server bound once the service exists.
struct RoleStart {
    let links: LinkSecurity
    let rpcTimeout: Duration
    let logger: Logger

    /// Logs the links' warnings (plain text allowed, …).
    init(links: LinkSecurity, rpcTimeout: Duration, logger: Logger) {
        self.links = links
        self.rpcTimeout = rpcTimeout
        self.logger = logger
        for warning in links.warnings { logger.warning("\(warning)") }
    }

    /// A client of the service at `endpoints` (one, or several instances separated by commas,
    /// see `BalancedRPCClient`), whose CURVE public key (when links use CURVE) is `serverKey`:
    /// instances of one role share their key pair.
    func client(_ endpoints: String, serverKey: (CurveLinkKeys) -> [UInt8]?) throws -> BalancedRPCClient {
        var configuration = RPCClient.Configuration(endpoint: endpoints, defaultTimeout: rpcTimeout)
        configuration.curve = links.curve.flatMap { $0.client(of: serverKey($0)) }
        return try BalancedRPCClient(endpoints: [endpoints], configuration: configuration, logger: logger)
    }

    /// Creates the folder of `databasePath` private (0700, its files 0600, the database created
    /// 0600; wider modes of existing ones narrowed, with a warning) and binds the event
    /// publisher at `eventsBind`.
    func prepareService(databasePath: String, eventsBind: String) throws -> EventPublisher {
        let folder = URL(fileURLWithPath: databasePath).deletingLastPathComponent()
        for fixed in try PrivateFiles.secure(folder: folder, databasePath: databasePath) {
            logger.warning("made data private that others could read: \(fixed)")
        }
        return try EventPublisher(endpoints: [eventsBind], curve: links.curve?.server, logger: logger)
    }

    /// The service's store: on the shared PostgreSQL database when `database` is set (a pool of its
    /// size, opened by `postgres`; the task running the pool is returned, to cancel at shutdown),
    /// else the SQLite file opened by `sqlite`. `service` names the store in the log.
    func openStore<Store>(
        _ service: String, database: DatabaseSettings?, postgres: (PostgresClient) async throws -> Store,
        sqlite: () async throws -> Store
    ) async throws -> (store: Store, database: Task<Void, Never>?) {
        guard let database else { return (try await sqlite(), nil) }
        // postgres-nio at trace prints every backend message, rows included (password and token
        // hashes): its own log stops at debug whatever the role's level.
        var poolLogger = logger
        poolLogger.logLevel = max(logger.logLevel, .debug)
        let client = PostgresClient(
            configuration: try database.postgres.clientConfiguration(maximumConnections: database.poolSize), backgroundLogger: poolLogger)
        let running = Task { await client.run() }
        let store: Store
        do { store = try await postgres(client) } catch {
            running.cancel()
            throw error
        }
        logger.info("\(service) store: PostgreSQL \(database.postgres) (pool of \(database.poolSize))")
        return (store, running)
    }

    /// Binds an RPC server for `router` at `rpcBind`, logs where the service listens, and returns
    /// the server with the endpoint it bound (a wildcard port resolved).
    func serve(_ name: String, router: RPCRouter, rpcBind: String, publisher: EventPublisher, note: String = "") throws -> (RPCServer, String) {
        var configuration = RPCServer.Configuration(endpoints: [rpcBind])
        configuration.curve = links.curve?.server
        configuration.callerRoles = links.curve?.callerRoles
        let server = try RPCServer(router: router, configuration: configuration, logger: logger)
        let bound = try server.start()
        let curve = links.curve.map { "; CURVE public key \($0.keyPair.publicKeyZ85), \($0.allowedClientKeys.count) client keys allowed" } ?? ""
        logger.info("\(name) listening on \(bound.joined(separator: ", ")), events on \(publisher.endpoints.joined(separator: ", "))\(note)\(curve)")
        return (server, bound[0])
    }
}
