import Crypto
import Foundation
import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import Logging
import PostgresStores
import ServiceLifecycle
import SQLiteSupport
import TokenCore
import TokenPorts
import TokenService
import SQLiteStores

/// Settings of the token role, read from the configuration table.
public struct TokenRoleSettings: Sendable {
    /// The token service's settings: issuer and audience, lifetimes, signing algorithm,
    /// key-encryption key.
    public var service: TokenConfiguration
    /// The embedded store's file (`token.sqlite` in the data folder), when no database URL is set.
    public var databasePath: String
    /// How far an acknowledged write to `token.sqlite` survives (`GATEHOUSE_DURABILITY`).
    public var durability: SQLiteTokenStore.Durability
    /// Where the RPC server binds (`GATEHOUSE_TOKEN_BIND`).
    public var rpcBind: String
    /// Where session events are published (`GATEHOUSE_TOKEN_EVENTS_BIND`).
    public var eventsBind: String
    /// Where the identity service is, for the claims asked at refresh (`GATEHOUSE_IDENTITY_URL`).
    public var identityURL: String
    /// The deadline of each call to the identity service (`GATEHOUSE_RPC_TIMEOUT_MS`).
    public var rpcTimeout: Duration
    /// CURVE keys or the plain-text policy of the role's links.
    public var links: LinkSecurity
    /// Seconds between sweeps of ended sessions and old refresh tokens (0: never).
    public var sweepInterval: Int
    /// Where the key-encryption key is read from, or made on first start, when
    /// `GATEHOUSE_KEY_ENCRYPTION_KEY_FILE` is not set: `key-encryption.key` in the data folder.
    /// Nil when the key was configured (and read into `service.encryptionKey`).
    public var generatedKeyEncryptionKeyPath: String?
    /// The interval of `token.heartbeat` (`GATEHOUSE_REVOCATION_HEARTBEAT_MS`).
    public var heartbeat: Duration
    /// PostgreSQL instead of `token.sqlite` (`GATEHOUSE_TOKEN_DATABASE_URL`): several instances.
    public var database: DatabaseSettings?

    /// Reads and checks the token role's keys of `config`;
    /// the endpoints given override the configured ones.
    public init(config: Config, rpcBind: String? = nil, eventsBind: String? = nil, identityURL: String? = nil) throws {
        let dataDir = try config.required(ConfigTable.dataDir)
        databasePath = URL(fileURLWithPath: dataDir).appendingPathComponent("token.sqlite").path
        var service = TokenConfiguration(issuer: try Self.issuer(config), audience: try config.required(ConfigTable.audience))
        service.accessTokenTTL = TimeInterval(try config.int(ConfigTable.accessTokenTTL))
        service.leeway = TimeInterval(try config.int(ConfigTable.accessTokenLeeway))
        service.sessionTTL = TimeInterval(try config.int(ConfigTable.sessionTTL))
        service.idleTimeout = TimeInterval(try config.int(ConfigTable.sessionIdleTTL))
        service.refreshGrace = TimeInterval(try config.int(ConfigTable.refreshGrace))
        service.sessionRetention = TimeInterval(try config.int(ConfigTable.sessionRetention))
        service.auditRetention = TimeInterval(try config.int(ConfigTable.auditRetention))
        sweepInterval = try config.int(ConfigTable.sweepInterval)
        let rotationDays = try config.int(ConfigTable.signingKeyRotationDays)
        service.keyRotationInterval = rotationDays == 0 ? nil : TimeInterval(rotationDays) * 86_400
        heartbeat = .milliseconds(try config.int(ConfigTable.revocationHeartbeatMs))
        let algorithm = try config.required(ConfigTable.signingAlgorithm)
        guard let alg = SigningAlgorithm.allCases.first(where: { $0.rawValue.lowercased() == algorithm.lowercased() }) else {
            throw ConfigError(message: "GATEHOUSE_SIGNING_ALGORITHM (--signing-algorithm) must be ES256, EdDSA or RS256, not '\(algorithm)'")
        }
        service.algorithm = alg
        durability = try config.powerLossDurability() ? .powerLoss : .processCrash
        if let path = config.string(ConfigTable.keyEncryptionKeyFile), !path.isEmpty {
            service.encryptionKey = try Self.readKey(path)
            generatedKeyEncryptionKeyPath = nil
        } else {
            generatedKeyEncryptionKeyPath = URL(fileURLWithPath: dataDir).appendingPathComponent(KeyEncryptionKey.defaultFileName).path
        }
        self.service = service
        self.rpcBind = try rpcBind ?? config.endpoint(ConfigTable.tokenBind)
        self.eventsBind = try eventsBind ?? config.endpoint(ConfigTable.tokenEventsBind)
        self.identityURL = try identityURL ?? config.endpoints(ConfigTable.identityURL)
        rpcTimeout = .milliseconds(try config.int(ConfigTable.rpcTimeoutMs))
        database = try DatabaseSettings.token(config)
        if database != nil, generatedKeyEncryptionKeyPath != nil {
            // A key made in one instance's data folder would seal keys the others cannot open.
            throw ConfigError(message: "with \(ConfigTable.tokenDatabaseURL.env), set \(ConfigTable.keyEncryptionKeyFile.env) (\(ConfigTable.keyEncryptionKeyFile.flag)) to the same key file on every token instance: the signing keys in the database are sealed with it (`gatehouse keys generate` writes one; deploy/README.md)")
        }
        if let database {
            // Every instance loads a rotated key within one interval; it signs after two and a second.
            self.service.keySyncInterval = TimeInterval(database.keySyncInterval)
            self.service.keyActivationDelay = TimeInterval(2 * database.keySyncInterval + 1)
        }
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
    /// `source` names where the path came from, for the error message.
    static func readKey(_ path: String, source: String = "GATEHOUSE_KEY_ENCRYPTION_KEY_FILE (--key-encryption-key-file)") throws -> SymmetricKey {
        guard let data = SecretFiles.contents(atPath: path) else {
            throw ConfigError(message: "\(source): cannot read the file")
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
        throw ConfigError(message: "\(source): the file must hold 32 bytes: raw, 64 hex characters or base64")
    }
}

/// The running token role.
public struct TokenRole: Sendable {
    /// The RPC server, bound and serving; run it in the role's service group.
    public let server: RPCServer
    /// The service behind the server (its handlers, store and key ring).
    public let service: TokenService
    /// The PUB socket of session events; close it at shutdown.
    public let publisher: EventPublisher
    /// The identity service's client; close it at shutdown.
    public let identityClient: BalancedRPCClient
    /// The endpoint the RPC server actually bound (a wildcard port resolved).
    public let rpcEndpoint: String
    /// Sweeps ended sessions and old refresh tokens; run it in the role's service group.
    public let sweeper: TokenSweeper
    /// Beats `token.heartbeat`; run it in the role's service group.
    public let heartbeat: RevocationHeartbeatService
    /// Reloads the signing keys every `GATEHOUSE_KEY_SYNC_INTERVAL` (several instances) and when
    /// a published key starts signing; run it in the role's service group.
    public let keySync: KeySync
    /// Makes a new signing key when the newest is `GATEHOUSE_SIGNING_KEY_ROTATION_DAYS` old; run it
    /// in the role's service group.
    public let keyRotation: KeyRotationSchedule
    /// The PostgreSQL pool's run loop, when the store is PostgreSQL: ended by `close()`.
    let database: Task<Void, Never>?

    /// The services to run in the role's group.
    public var services: [any Service] { [server, sweeper, heartbeat, keySync, keyRotation] }

    /// Closes the sockets and the database pool (after the services stopped).
    public func close() async {
        await publisher.close()
        await identityClient.close()
        database?.cancel()
        await database?.value
    }

    /// Creates the data folder, opens and migrates the database, loads the signing keys (making the
    /// first one), binds the sockets. The service reads the time from `clock`.
    public static func start(_ settings: TokenRoleSettings, clock: WallClock = .system, logger: Logger) async throws -> TokenRole {
        let start = RoleStart(links: settings.links, rpcTimeout: settings.rpcTimeout, logger: logger)
        let publisher = try start.prepareService(databasePath: settings.databasePath, eventsBind: settings.eventsBind)
        var settings = settings
        if let path = settings.generatedKeyEncryptionKeyPath {
            settings.service.encryptionKey = try KeyEncryptionKey.loadOrCreate(
                at: path, databasePath: settings.databasePath, logger: logger)
        }
        let identityClient = try start.client(settings.identityURL) { $0.identityServerKey }
        let (store, database) = try await start.openStore(
            "token", database: settings.database,
            postgres: { client -> any TokenStorage in PostgresTokenStore(client: client, logger: logger) },
            sqlite: { () -> any TokenStorage in try SQLiteTokenStore(path: settings.databasePath, durability: settings.durability, logger: logger) })
        let service: TokenService
        do {
            service = try await TokenService.start(
                configuration: settings.service, store: store, identity: identityClient.caller,
                publish: { topic, payload in publisher.publish(topic: topic, payload: payload) }, clock: clock, logger: logger)
        } catch {
            database?.cancel()
            throw error
        }
        let server: RPCServer, bound: String
        do {
            (server, bound) = try start.serve(
                "token service", router: service.router(), rpcBind: settings.rpcBind, publisher: publisher,
                note: "; signing key \(service.keys.activeKid)")
        } catch {
            database?.cancel()
            throw error
        }
        return TokenRole(
            server: server, service: service, publisher: publisher, identityClient: identityClient, rpcEndpoint: bound,
            sweeper: TokenSweeper(service: service, interval: settings.sweepInterval == 0 ? nil : .seconds(settings.sweepInterval), logger: logger),
            heartbeat: RevocationHeartbeatService(feed: service.revocationFeed, interval: settings.heartbeat),
            keySync: KeySync(service: service, logger: logger), keyRotation: KeyRotationSchedule(service: service, logger: logger),
            database: database)
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

    /// Sweeps until graceful shutdown (see the type).
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
                do {
                    // Several instances: one sweeps at a time, whichever takes the lead.
                    _ = try await service.store.runIfLeader("sweep") { try await service.sweep() }
                } catch is CancellationError { return } catch {
                    logger.warning("token sweep failed; trying again in \(interval): \(error)")
                }
            }
        }
    }
}

/// Publishes the token service's `token.heartbeat` (its revocation feed's epoch and last seq)
/// every `interval` until graceful shutdown, the first one at once.
public struct RevocationHeartbeatService: Service {
    let feed: RevocationFeed
    let interval: Duration

    /// Beats until graceful shutdown (see the type).
    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                // With a shared store the beat follows the database's log first (see `RevocationFeed`).
                if feed.isShared { await feed.catchUp() } else { feed.heartbeat() }
                try await Task.sleep(for: interval)
            }
        }
    }
}

/// Reloads the token service's signing keys until graceful shutdown: every `keySyncInterval`
/// (several instances on one store: a key another instance rotated is published here within one
/// interval), and at the moment a published key starts signing. With one instance and no key
/// waiting it only waits for shutdown.
public struct KeySync: Service {
    let service: TokenService
    let logger: Logger

    /// Reloads until graceful shutdown (see the type).
    public func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var next = service.nextKeyActivation
            var failures = 0
            while true {
                var wait: Duration?
                if let interval = service.configuration.keySyncInterval { wait = .milliseconds(Int64(interval * 1000)) }
                if let next {
                    let until = Duration.milliseconds(Int64(max(0, next.timeIntervalSince(service.clock.now)) * 1000) + 1)
                    wait = min(wait ?? until, until)
                }
                if failures > 0 {
                    // After a failed reload (the store unreachable): 1 s, doubling up to 30 s, not
                    // the activation that has passed meanwhile.
                    wait = .seconds(min(30, 1 << min(failures - 1, 5)))
                }
                guard let wait else {
                    try await gracefulShutdown()
                    return
                }
                try await Task.sleep(for: wait)
                do {
                    next = try await service.reloadKeys()
                    failures = 0
                } catch is CancellationError { return } catch {
                    failures += 1
                    logger.warning("cannot reload the signing keys; trying again: \(error)")
                }
            }
        }
    }
}

/// Runs `TokenService.rotateKeysIfDue()` until graceful shutdown, when a rotation interval is
/// configured (`GATEHOUSE_SIGNING_KEY_ROTATION_DAYS`): every `checkInterval` it compares the newest
/// key's age, read from the service's clock, with the interval (in memory: no store access until a
/// rotation is due); the store decides the rotation itself, so of several instances one rotates.
/// A failed rotation is logged and tried again at the next check. Off, it only waits for shutdown.
public struct KeyRotationSchedule: Service {
    let service: TokenService
    let logger: Logger
    var checkInterval: Duration = .seconds(1)

    /// Checks until graceful shutdown (see the type).
    public func run() async throws {
        guard service.configuration.keyRotationInterval != nil else {
            try? await gracefulShutdown()
            return
        }
        try? await cancelWhenGracefulShutdown {
            var failures = 0
            while true {
                // After a failure (the store unreachable): 1 s, doubling up to a minute.
                try await Task.sleep(for: failures == 0 ? checkInterval : .seconds(min(60, 1 << min(failures - 1, 6))))
                do {
                    if let rotated = try await service.rotateKeysIfDue() {
                        logger.notice("scheduled signing key rotation: \(rotated.kid) signs from \(rotated.activatesAt.map { "\($0)" } ?? "now"); \(rotated.previousKid) is published until \(rotated.previousRetiresAt.map { "\($0)" } ?? "-")")
                    }
                    failures = 0
                } catch is CancellationError { return } catch {
                    failures += 1
                    logger.warning("scheduled signing key rotation failed; trying again: \(error)")
                }
            }
        }
    }
}
