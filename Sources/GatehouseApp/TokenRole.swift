import Crypto
import Foundation
import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import Logging
import ServiceLifecycle
import TokenCore
import TokenService

/// Settings of the token role, read from the configuration table.
public struct TokenRoleSettings: Sendable {
    public var service: TokenConfiguration
    public var rpcBind: String
    public var eventsBind: String
    public var identityURL: String
    public var rpcTimeout: Duration
    /// CURVE keys or the plain-text policy of the role's links.
    public var links: LinkSecurity
    /// Seconds between sweeps of ended sessions and old refresh tokens (0: never).
    public var sweepInterval: Int

    public init(config: Config, rpcBind: String? = nil, eventsBind: String? = nil, identityURL: String? = nil) throws {
        let dataDir = try config.required(ConfigTable.dataDir)
        var service = TokenConfiguration(
            databasePath: URL(fileURLWithPath: dataDir).appendingPathComponent("token.sqlite").path,
            issuer: try Self.issuer(config), audience: try config.required(ConfigTable.audience))
        service.accessTokenTTL = TimeInterval(try config.int(ConfigTable.accessTokenTTL, in: 60...86_400))
        service.sessionTTL = TimeInterval(try config.int(ConfigTable.sessionTTL, in: 300...31_536_000))
        service.idleTimeout = TimeInterval(try config.int(ConfigTable.sessionIdleTTL, in: 300...31_536_000))
        service.refreshGrace = TimeInterval(try config.int(ConfigTable.refreshGrace, in: 0...300))
        service.sessionRetention = TimeInterval(try config.int(ConfigTable.sessionRetention, in: 3_600...31_536_000))
        sweepInterval = try config.int(ConfigTable.sweepInterval, in: 0...86_400)
        let algorithm = try config.required(ConfigTable.signingAlgorithm)
        guard let alg = SigningAlgorithm.allCases.first(where: { $0.rawValue.lowercased() == algorithm.lowercased() }) else {
            throw ConfigError(message: "GATEHOUSE_SIGNING_ALGORITHM (--signing-algorithm) must be ES256, EdDSA or RS256, not '\(algorithm)'")
        }
        service.algorithm = alg
        service.durability = try config.powerLossDurability() ? .powerLoss : .processCrash
        if let path = config.string(ConfigTable.keyEncryptionKeyFile), !path.isEmpty {
            service.encryptionKey = try Self.readKey(path)
        }
        self.service = service
        self.rpcBind = try rpcBind ?? config.endpoint(ConfigTable.tokenBind)
        self.eventsBind = try eventsBind ?? config.endpoint(ConfigTable.tokenEventsBind)
        self.identityURL = try identityURL ?? config.endpoint(ConfigTable.identityURL)
        rpcTimeout = .milliseconds(try config.int(ConfigTable.rpcTimeoutMs, in: 50...60_000))
        links = try LinkSecurity.load(config, role: .token, links: [
            .init(ConfigTable.tokenBind, self.rpcBind, binds: true),
            .init(ConfigTable.tokenEventsBind, self.eventsBind, binds: true),
            .init(ConfigTable.identityURL, self.identityURL, binds: false),
        ])
    }

    /// `GATEHOUSE_ISSUER`, else the public URL, else `http://HOST:PORT`.
    static func issuer(_ config: Config) throws -> String {
        if let issuer = config.string(ConfigTable.issuer), !issuer.isEmpty { return issuer }
        return try GatewayRoleSettings.publicURL(config)
    }

    /// A 32-byte key from a file: raw bytes, 64 hex characters or base64.
    static func readKey(_ path: String) throws -> SymmetricKey {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigError(message: "GATEHOUSE_KEY_ENCRYPTION_KEY_FILE (--key-encryption-key-file): cannot read the file")
        }
        if data.count == 32 { return SymmetricKey(data: data) }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if text.count == 64, text.allSatisfy(\.isHexDigit) {
            var bytes: [UInt8] = []
            var index = text.startIndex
            while index < text.endIndex {
                let next = text.index(index, offsetBy: 2)
                bytes.append(UInt8(text[index..<next], radix: 16)!)
                index = next
            }
            return SymmetricKey(data: bytes)
        }
        if let decoded = Data(base64Encoded: text), decoded.count == 32 { return SymmetricKey(data: decoded) }
        throw ConfigError(message: "GATEHOUSE_KEY_ENCRYPTION_KEY_FILE (--key-encryption-key-file) must hold 32 bytes: raw, 64 hex characters or base64")
    }
}

/// The running token role.
public struct TokenRole: Sendable {
    public let server: RPCServer
    public let service: TokenService
    public let publisher: EventPublisher
    public let identityClient: RPCClient
    public let rpcEndpoint: String
    /// Sweeps ended sessions and old refresh tokens; run it in the role's service group.
    public let sweeper: TokenSweeper

    /// Creates the data folder, opens the store, loads the keys and binds the sockets. The service
    /// reads the time from `clock`.
    public static func start(_ settings: TokenRoleSettings, clock: WallClock = .system, logger: Logger) async throws -> TokenRole {
        let folder = URL(fileURLWithPath: settings.service.databasePath).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for warning in settings.links.warnings { logger.warning("\(warning)") }
        let curve = settings.links.curve
        let publisher = try EventPublisher(endpoints: [settings.eventsBind], curve: curve?.server, logger: logger)
        var identityConfiguration = RPCClient.Configuration(endpoint: settings.identityURL, defaultTimeout: settings.rpcTimeout)
        identityConfiguration.curve = curve?.client(of: curve?.identityServerKey)
        let identityClient = try RPCClient(configuration: identityConfiguration, logger: logger)
        let service = try await TokenService.start(
            configuration: settings.service, identity: identityClient,
            publish: { topic, payload in publisher.publish(topic: topic, payload: payload) }, clock: clock,
            logger: logger)
        var serverConfiguration = RPCServer.Configuration(endpoints: [settings.rpcBind])
        serverConfiguration.curve = curve?.server
        let server = try RPCServer(router: service.router(), configuration: serverConfiguration, logger: logger)
        let bound = try server.start()
        logger.info("token service listening on \(bound.joined(separator: ", ")), events on \(publisher.endpoints.joined(separator: ", ")); signing key \(service.keys.activeKid)\(curve.map { "; CURVE public key \($0.keyPair.publicKeyZ85), \($0.allowedClientKeys.count) client keys allowed" } ?? "")")
        return TokenRole(
            server: server, service: service, publisher: publisher, identityClient: identityClient, rpcEndpoint: bound[0],
            sweeper: TokenSweeper(service: service, interval: settings.sweepInterval == 0 ? nil : .seconds(settings.sweepInterval), logger: logger))
    }
}

/// Runs `TokenService.sweep()` every `interval` until graceful shutdown: the first pass a minute
/// after start (not in the start-up path), then one per interval. A failed pass is logged and
/// tried again at the next interval. With no interval it only waits for shutdown.
public struct TokenSweeper: Service {
    let service: TokenService
    let interval: Duration?
    let logger: Logger
    var firstDelay: Duration = .seconds(60)
    /// Waits between passes (tests replace it to run passes on demand, without waiting).
    var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }

    public func run() async throws {
        guard let interval else {
            try? await gracefulShutdown()
            return
        }
        try? await cancelWhenGracefulShutdown {
            var delay = firstDelay
            while true {
                try await sleep(delay)
                delay = interval
                do { try await service.sweep() } catch is CancellationError { return } catch {
                    logger.warning("token sweep failed; trying again in \(interval): \(error)")
                }
            }
        }
    }
}
