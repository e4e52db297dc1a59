import Foundation
import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import Gateway
import IdentityCore
import IdentityService
import Logging
import Mail
import PostgresStores
import RPCRouting
import ServiceLifecycle
import SQLiteSupport

/// Hands identity events to the ZeroMQ PUB socket.
struct PublisherEventSink: EventSink {
    let publisher: EventPublisher
    func publish(topic: String, payload: [UInt8]) async {
        publisher.publish(topic: topic, payload: payload)
    }
}

/// Settings of the identity role, read from the configuration table.
public struct IdentityRoleSettings: Sendable {
    /// The identity service's settings: Argon2id parameters, password policy, hashing pool.
    public var service: IdentityConfiguration
    /// The embedded store's file (`identity.sqlite` in the data folder), when no database URL is set.
    public var databasePath: String
    /// How far an acknowledged write to `identity.sqlite` survives (`GATEHOUSE_DURABILITY`).
    public var durability: SQLiteUserStore.Durability
    /// Where the RPC server binds (`GATEHOUSE_IDENTITY_BIND`).
    public var rpcBind: String
    /// Where user events are published (`GATEHOUSE_IDENTITY_EVENTS_BIND`).
    public var eventsBind: String
    /// Where the token service is, to issue sessions (`GATEHOUSE_TOKEN_URL`).
    public var tokenURL: String
    /// The deadline of each call to the token service (`GATEHOUSE_RPC_TIMEOUT_MS`).
    public var rpcTimeout: Duration
    /// CURVE keys or the plain-text policy of the role's links.
    public var links: LinkSecurity
    /// Seconds between sweeps of inactive anonymous users (`GATEHOUSE_ANONYMOUS_SWEEP_INTERVAL`; 0: never).
    public var anonymousSweepInterval: Int
    /// Where mail goes (`GATEHOUSE_SMTP_*`; the local mailbox by default) and how often it is tried.
    public var mail: MailSettings
    /// How many operator template files `GATEHOUSE_MAIL_TEMPLATES` supplied (0: built-in only).
    public var mailTemplateFiles = 0
    /// The data folder (`GATEHOUSE_DATA_DIR`): the local mailbox is its `mailbox` folder.
    public var dataDir: String
    /// The interval of `identity.heartbeat` and of the change log's tail (`GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS`).
    public var changeFeedHeartbeat: Duration = .seconds(1)
    /// The admin listener (`GATEHOUSE_ADMIN_HOST`, `GATEHOUSE_ADMIN_PORT`); nil when the port is 0.
    public var admin: AdminAPIConfiguration?
    /// The shared store (`GATEHOUSE_IDENTITY_DATABASE_URL`), or nil for `identity.sqlite`.
    public var database: DatabaseSettings?

    /// Reads and checks the identity role's keys of `config`;
    /// the endpoints given override the configured ones.
    public init(config: Config, rpcBind: String? = nil, eventsBind: String? = nil, tokenURL: String? = nil) throws {
        let dataDir = try config.required(ConfigTable.dataDir)
        self.dataDir = dataDir
        mail = try MailSettings(config: config)
        let argon2 = Argon2Parameters(
            memoryKiB: UInt32(try config.int(ConfigTable.argon2MemoryKiB)),
            iterations: UInt32(try config.int(ConfigTable.argon2Iterations)),
            parallelism: UInt32(try config.int(ConfigTable.argon2Parallelism)))
        databasePath = URL(fileURLWithPath: dataDir).appendingPathComponent("identity.sqlite").path
        durability = try config.powerLossDurability() ? .powerLoss : .processCrash
        service = IdentityConfiguration(
            argon2: argon2,
            minPasswordLength: try config.int(ConfigTable.passwordMinLength),
            hashWorkers: try config.optionalInt(ConfigTable.hashWorkers) ?? ProcessInfo.processInfo.activeProcessorCount,
            hashQueueLimit: try config.int(ConfigTable.hashQueue),
            attemptThrottle: PasswordAttemptThrottle.Settings(
                threshold: try config.int(ConfigTable.accountThrottleFailures),
                window: TimeInterval(try config.int(ConfigTable.accountThrottleWindow)),
                baseDelay: TimeInterval(try config.int(ConfigTable.accountThrottleBaseDelay)),
                maxDelay: TimeInterval(try config.int(ConfigTable.accountThrottleMaxDelay)),
                capacity: try config.int(ConfigTable.accountThrottleMaxAccounts)))
        service.defaultSettingsJSON = try Self.defaultSettings(config)
        service.recentLoginWindow = TimeInterval(try config.int(ConfigTable.recentLoginWindow))
        service.anonymousRetention = TimeInterval(try Self.anonymousRetention(config))
        anonymousSweepInterval = try config.int(ConfigTable.anonymousSweepInterval)
        service.migrationResumeTTL = TimeInterval(try config.int(ConfigTable.migrationResumeTTL))
        service.passwordReset = try Self.passwordReset(config)
        service.emailFlows = try Self.emailFlows(config)
        (service.mailTemplates, mailTemplateFiles) = try Self.mailTemplates(config)
        changeFeedHeartbeat = .milliseconds(try config.int(ConfigTable.changeFeedHeartbeatMs))
        service.changeLogRetention = TimeInterval(try config.int(ConfigTable.changeLogRetention))
        service.changeLogMaxPerUser = try config.int(ConfigTable.changeLogMaxPerUser)
        service.auditRetention = TimeInterval(try config.int(ConfigTable.auditRetention))
        (service.providers, service.providerOptions) = try Self.providers(config)
        service.appleServer = try Self.appleServer(config, dataDir: dataDir)
        let adminPort = try config.int(ConfigTable.adminPort)
        database = try DatabaseSettings.identity(config)
        if let database, database.poolSize < 6 {
            // One connection listens for the change log's notifications and each of three jobs
            // (mail delivery, the anonymous sweep, the change-log prune) may hold one for its lead
            // while its own statements, and requests, need more: fewer could wait on themselves.
            throw ConfigError(message: "\(ConfigTable.databasePoolSize.env) (\(ConfigTable.databasePoolSize.flag)) must be at least 6 for the identity service on PostgreSQL, not \(database.poolSize)")
        }
        admin = adminPort == 0 ? nil : AdminAPIConfiguration(
            host: config.string(ConfigTable.adminHost) ?? "127.0.0.1", port: adminPort,
            requestTimeout: .milliseconds(try config.int(ConfigTable.rpcTimeoutMs)) * 2)
        self.rpcBind = try rpcBind ?? config.endpoint(ConfigTable.identityBind)
        self.eventsBind = try eventsBind ?? config.endpoint(ConfigTable.identityEventsBind)
        self.tokenURL = try tokenURL ?? config.endpoints(ConfigTable.tokenURL)
        rpcTimeout = .milliseconds(try config.int(ConfigTable.rpcTimeoutMs))
        links = try LinkSecurity.load(config, role: .identity, links: [
            .init(ConfigTable.identityBind, self.rpcBind, binds: true),
            .init(ConfigTable.identityEventsBind, self.eventsBind, binds: true),
            .init(ConfigTable.tokenURL, self.tokenURL, binds: false),
        ])
    }

    /// `GATEHOUSE_DEFAULT_SETTINGS`: a JSON object of at most 16 KiB, in compact form.
    static func defaultSettings(_ config: Config) throws -> String {
        let key = ConfigTable.defaultSettings
        switch SettingsDocument.validDefault(config.string(key) ?? "{}") {
        case .success(let json): return json
        case .failure(let refused): throw ConfigError(message: "\(key.env) (\(key.flag)) \(refused.reason)")
        }
    }
}

extension IdentityRoleSettings {
    /// `GATEHOUSE_ANONYMOUS_RETENTION`: 0 (off), or at least an hour (longer than any access
    /// token, so a user active with one is never inactive), at most ten years.
    static func anonymousRetention(_ config: Config) throws -> Int {
        let key = ConfigTable.anonymousRetention
        let seconds = try config.int(key)
        guard seconds == 0 || seconds >= 3_600 else {
            throw ConfigError(message: "\(key.env) (\(key.flag)) must be 0 (keep anonymous users) or at least 3600 seconds, not \(seconds)")
        }
        // A session idle for the whole retention must already be unusable (idle-expired), or a
        // user could refresh between the sweep's look at its activity and its deletion.
        let idle = ConfigTable.sessionIdleTTL
        let idleSeconds = try config.int(idle)
        guard seconds == 0 || seconds >= idleSeconds else {
            throw ConfigError(message: "\(key.env) (\(key.flag)) must be 0 or at least \(idle.env) (\(idleSeconds) s), not \(seconds): with a shorter retention the sweep could remove an anonymous user whose idle session still works")
        }
        return seconds
    }
}

/// The running identity role: its RPC server (a `Service`) and what it holds.
public struct IdentityRole: Sendable {
    /// The RPC server, bound and serving; run it in the role's service group.
    public let server: RPCServer
    /// The service behind the server (its handlers and store).
    public let service: IdentityService
    /// The PUB socket of user events; close it at shutdown.
    public let publisher: EventPublisher
    /// The token service's client; close it at shutdown.
    public let tokenClient: BalancedRPCClient
    /// Endpoints actually bound (wildcard ports resolved).
    public let rpcEndpoint: String
    /// Sweeps inactive anonymous users; run it in the role's service group.
    public let anonymousSweeper: AnonymousSweeper
    /// Delivers the mail outbox; run it in the role's service group.
    public let outboxDelivery: OutboxDelivery
    /// Publishes and prunes the change log; run it in the role's service group.
    public let changeLog: ChangeLogService
    /// The admin listener (nil when turned off); run it in the role's service group.
    public let adminAPI: (any Service)?
    /// The PostgreSQL pool's run loop, when the store is PostgreSQL: ended by `close()`.
    let database: Task<Void, Never>?
    /// Revokes queued Apple tokens (nil without Sign in with Apple's server side); run it in the
    /// role's service group.
    public var appleRevocations: (any Service)? {
        service.appleRevocations.map { worker in AppleRevocationService(worker: worker) }
    }

    /// Closes the sockets, the token client and the database pool (after the services stopped).
    public func close() async {
        await publisher.close()
        await tokenClient.close()
        database?.cancel()
        await database?.value
    }

    /// Creates the data folder, opens and migrates the database (SQLite, or PostgreSQL with
    /// `GATEHOUSE_IDENTITY_DATABASE_URL`), binds the sockets. The service reads the time from
    /// `clock`. `smtp` makes the transport of a configured relay (the SMTP client's seam).
    public static func start(
        _ settings: IdentityRoleSettings, clock: WallClock = .system, logger: Logger,
        smtp: (SMTPSettings) throws -> any MailTransport = MailSettings.smtpClient
    ) async throws -> IdentityRole {
        let (transport, destination) = try settings.mail.makeTransport(dataDir: settings.dataDir, clock: clock, smtp: smtp)
        let start = RoleStart(links: settings.links, rpcTimeout: settings.rpcTimeout, logger: logger)
        let publisher = try start.prepareService(databasePath: settings.databasePath, eventsBind: settings.eventsBind)
        let tokenClient = try start.client(settings.tokenURL) { $0.tokenServerKey }
        let (store, database) = try await start.openStore(
            "identity", database: settings.database,
            postgres: { client -> any IdentityStorage in
                let postgres = PostgresUserStore(client: client, logger: logger)
                try await postgres.migrate()
                return postgres
            },
            sqlite: { () -> any IdentityStorage in
                let sqlite = try await SQLiteUserStore.open(path: settings.databasePath, durability: settings.durability)
                try await sqlite.migrate()
                return sqlite
            })
        let service: IdentityService
        do {
            service = try await IdentityService.start(
                configuration: settings.service, store: store, tokens: tokenClient.caller, events: PublisherEventSink(publisher: publisher),
                clock: clock, logger: logger)
        } catch {
            database?.cancel()
            throw error
        }
        let server: RPCServer, bound: String
        do {
            (server, bound) = try start.serve("identity service", router: service.router, rpcBind: settings.rpcBind, publisher: publisher)
        } catch {
            database?.cancel()
            throw error
        }
        if settings.mailTemplateFiles > 0 {
            logger.info(
                "mail templates: \(settings.mailTemplateFiles) operator files over the built-in ones; locales \(settings.service.mailTemplates.locales.joined(separator: ", "))")
        }
        let interval: Duration? = settings.anonymousSweepInterval == 0 ? nil : .seconds(settings.anonymousSweepInterval)
        let worker = OutboxWorker(
            store: service.store, transport: transport, destination: destination, clock: clock,
            policy: OutboxWorker.Policy(maxAttempts: settings.mail.maxAttempts, deliveryTimeout: .seconds(settings.mail.deliveryTimeout)),
            metrics: service.handlers.outboxMetrics, logger: logger)
        return IdentityRole(
            server: server, service: service, publisher: publisher, tokenClient: tokenClient, rpcEndpoint: bound,
            anonymousSweeper: AnonymousSweeper(sweep: service.anonymousSweep, interval: interval, logger: logger),
            outboxDelivery: OutboxDelivery(worker: worker),
            changeLog: ChangeLogService(
                publisher: service.changeLog, heartbeat: settings.changeFeedHeartbeat, prune: service.changeLogPrune, logger: logger),
            adminAPI: settings.admin.map { admin in
                // The identity service in process (its own key's rights), the token service through the role's client.
                buildAdminAPI(configuration: admin, identity: LocalCaller(router: service.router), tokens: tokenClient.caller, logger: logger)
            }, database: database)
    }
}

/// Runs the Apple revocation worker until graceful shutdown (a revocation under way is
/// cancelled; its row stays queued).
struct AppleRevocationService: Service {
    let worker: AppleRevocationWorker

    func run() async throws {
        await cancelWhenGracefulShutdown { await worker.run() }
    }
}
