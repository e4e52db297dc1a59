import Foundation
import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import IdentityCore
import IdentityService
import Logging
import ServiceLifecycle

/// Hands identity events to the ZeroMQ PUB socket.
struct PublisherEventSink: EventSink {
    let publisher: EventPublisher
    func publish(topic: String, payload: [UInt8]) async {
        publisher.publish(topic: topic, payload: payload)
    }
}

/// Settings of the identity role, read from the configuration table.
public struct IdentityRoleSettings: Sendable {
    public var service: IdentityConfiguration
    public var rpcBind: String
    public var eventsBind: String
    public var tokenURL: String
    public var rpcTimeout: Duration
    /// CURVE keys or the plain-text policy of the role's links.
    public var links: LinkSecurity

    public init(config: Config, rpcBind: String? = nil, eventsBind: String? = nil, tokenURL: String? = nil) throws {
        let dataDir = try config.required(ConfigTable.dataDir)
        let argon2 = Argon2Parameters(
            memoryKiB: UInt32(try config.int(ConfigTable.argon2MemoryKiB, in: 8...4_194_304)),
            iterations: UInt32(try config.int(ConfigTable.argon2Iterations, in: 1...100)),
            parallelism: UInt32(try config.int(ConfigTable.argon2Parallelism, in: 1...64)))
        service = IdentityConfiguration(
            databasePath: URL(fileURLWithPath: dataDir).appendingPathComponent("identity.sqlite").path,
            durability: try config.powerLossDurability() ? .powerLoss : .processCrash,
            argon2: argon2,
            minPasswordLength: try config.int(ConfigTable.passwordMinLength, in: 8...64),
            hashWorkers: try config.optionalInt(ConfigTable.hashWorkers, in: 1...256) ?? ProcessInfo.processInfo.activeProcessorCount,
            hashQueueLimit: try config.int(ConfigTable.hashQueue, in: 0...100_000))
        self.rpcBind = try rpcBind ?? config.endpoint(ConfigTable.identityBind)
        self.eventsBind = try eventsBind ?? config.endpoint(ConfigTable.identityEventsBind)
        self.tokenURL = try tokenURL ?? config.endpoint(ConfigTable.tokenURL)
        rpcTimeout = .milliseconds(try config.int(ConfigTable.rpcTimeoutMs, in: 50...60_000))
        links = try LinkSecurity.load(config, role: .identity, links: [
            .init(ConfigTable.identityBind, self.rpcBind, binds: true),
            .init(ConfigTable.identityEventsBind, self.eventsBind, binds: true),
            .init(ConfigTable.tokenURL, self.tokenURL, binds: false),
        ])
    }
}

/// The running identity role: its RPC server (a `Service`) and what it holds.
public struct IdentityRole: Sendable {
    public let server: RPCServer
    public let service: IdentityService
    public let publisher: EventPublisher
    public let tokenClient: RPCClient
    /// Endpoints actually bound (wildcard ports resolved).
    public let rpcEndpoint: String

    /// Creates the data folder, opens and migrates the database, binds the sockets. The service
    /// reads the time from `clock`.
    public static func start(_ settings: IdentityRoleSettings, clock: WallClock = .system, logger: Logger) async throws -> IdentityRole {
        let folder = URL(fileURLWithPath: settings.service.databasePath).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for warning in settings.links.warnings { logger.warning("\(warning)") }
        let curve = settings.links.curve
        let publisher = try EventPublisher(endpoints: [settings.eventsBind], curve: curve?.server, logger: logger)
        var tokenConfiguration = RPCClient.Configuration(endpoint: settings.tokenURL, defaultTimeout: settings.rpcTimeout)
        tokenConfiguration.curve = curve?.client(of: curve?.tokenServerKey)
        let tokenClient = try RPCClient(configuration: tokenConfiguration, logger: logger)
        let service = try await IdentityService.start(
            configuration: settings.service, tokens: tokenClient, events: PublisherEventSink(publisher: publisher), clock: clock,
            logger: logger)
        var serverConfiguration = RPCServer.Configuration(endpoints: [settings.rpcBind])
        serverConfiguration.curve = curve?.server
        let server = try RPCServer(router: service.router, configuration: serverConfiguration, logger: logger)
        let bound = try server.start()
        logger.info("identity service listening on \(bound.joined(separator: ", ")), events on \(publisher.endpoints.joined(separator: ", "))\(curve.map { "; CURVE public key \($0.keyPair.publicKeyZ85), \($0.allowedClientKeys.count) client keys allowed" } ?? "")")
        return IdentityRole(server: server, service: service, publisher: publisher, tokenClient: tokenClient, rpcEndpoint: bound[0])
    }
}
