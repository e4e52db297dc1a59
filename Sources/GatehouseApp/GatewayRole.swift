import Foundation
import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import Gateway
import Hummingbird
import Logging
import ServiceLifecycle

/// Settings of the gateway role, read from the configuration table.
public struct GatewayRoleSettings: Sendable {
    /// The HTTP side: host, port, body limit, CORS origins, token issuer and audience, public URL.
    public var gateway: GatewayConfiguration
    /// Where the identity service's RPC server is
    /// (`GATEHOUSE_IDENTITY_URL`, or `inproc://` under `serve`).
    public var identityURL: String
    /// Where the token service's RPC server is (`GATEHOUSE_TOKEN_URL`).
    public var tokenURL: String
    /// Where the token service publishes session revocations (`GATEHOUSE_TOKEN_EVENTS_URL`).
    public var tokenEventsURL: String
    /// Where the identity service publishes user changes (`GATEHOUSE_IDENTITY_EVENTS_URL`).
    public var identityEventsURL: String
    /// The deadline of each service call and of each HTTP request (`GATEHOUSE_RPC_TIMEOUT_MS`).
    public var rpcTimeout: Duration
    /// CURVE keys or the plain-text policy of the role's links.
    public var links: LinkSecurity

    /// Reads and checks the gateway's keys of `config`;
    /// the endpoints given override the configured ones.
    public init(
        config: Config, identityURL: String? = nil, tokenURL: String? = nil, tokenEventsURL: String? = nil, identityEventsURL: String? = nil
    ) throws {
        let timeoutMs = try config.int(ConfigTable.rpcTimeoutMs)
        rpcTimeout = .milliseconds(timeoutMs)
        let origins = config.list(ConfigTable.corsOrigins)
        for origin in origins where !(origin.hasPrefix("http://") || origin.hasPrefix("https://")) {
            throw ConfigError(message: "GATEHOUSE_CORS_ORIGINS (--cors-origins): '\(origin)' is not an http(s) origin")
        }
        gateway = GatewayConfiguration(
            host: try config.required(ConfigTable.httpHost),
            port: try config.int(ConfigTable.httpPort, in: 0...65_535),
            maxBodySize: try config.int(ConfigTable.maxBodyBytes),
            allowedOrigins: origins,
            issuer: try TokenRoleSettings.issuer(config),
            audience: try config.required(ConfigTable.audience),
            publicBaseURL: try Self.publicURL(config),
            trustedProxies: try Self.trustedProxies(config),
            rateLimits: try Self.rateLimits(config),
            requestTimeout: .milliseconds(timeoutMs),
            clockLeeway: .seconds(try config.int(ConfigTable.accessTokenLeeway)),
            maxAccessTokenTTL: .seconds(try config.int(ConfigTable.accessTokenTTL)),
            headTimeout: .milliseconds(try config.int(ConfigTable.httpHeadTimeoutMs)),
            bodyTimeout: .milliseconds(try config.int(ConfigTable.httpBodyTimeoutMs)),
            idleTimeout: .milliseconds(try config.int(ConfigTable.httpIdleTimeoutMs)),
            maxConnections: try config.int(ConfigTable.httpMaxConnections),
            maxConnectionsPerAddress: try config.int(ConfigTable.httpMaxConnectionsPerAddress))
        gateway.revocationHeartbeat = .milliseconds(try config.int(ConfigTable.revocationHeartbeatMs))
        gateway.appName = try config.required(ConfigTable.appName)
        gateway.streams = try Self.streamSettings(config)
        self.identityURL = try identityURL ?? config.endpoints(ConfigTable.identityURL)
        self.tokenURL = try tokenURL ?? config.endpoints(ConfigTable.tokenURL)
        self.tokenEventsURL = try tokenEventsURL ?? config.endpoints(ConfigTable.tokenEventsURL)
        self.identityEventsURL = try identityEventsURL ?? config.endpoints(ConfigTable.identityEventsURL)
        links = try LinkSecurity.load(config, role: .gateway, links: [
            .init(ConfigTable.identityURL, self.identityURL, binds: false),
            .init(ConfigTable.tokenURL, self.tokenURL, binds: false),
            .init(ConfigTable.tokenEventsURL, self.tokenEventsURL, binds: false),
            .init(ConfigTable.identityEventsURL, self.identityEventsURL, binds: false),
        ])
    }

    /// `GATEHOUSE_TRUSTED_PROXIES`.
    static func trustedProxies(_ config: Config) throws -> TrustedProxies {
        do {
            return try TrustedProxies(config.list(ConfigTable.trustedProxies))
        } catch {
            throw ConfigError(message: "GATEHOUSE_TRUSTED_PROXIES (--trusted-proxies): \(error)")
        }
    }

    /// The `GATEHOUSE_RATE_LIMIT_*` keys.
    static func rateLimits(_ config: Config) throws -> RateLimits {
        var limits = RateLimits.defaults
        limits.maxClients = try config.int(ConfigTable.rateLimitMaxClients)
        let keys: [(RateLimitClass, ConfigKey)] = [
            (.signIn, ConfigTable.rateLimitSignIn), (.signUp, ConfigTable.rateLimitSignUp),
            (.anonymousSignUp, ConfigTable.rateLimitAnonymousSignUp),
            (.passwordStrength, ConfigTable.rateLimitPasswordStrength), (.refresh, ConfigTable.rateLimitRefresh),
            (.passwordReset, ConfigTable.rateLimitPasswordReset),
        ]
        for (kind, key) in keys {
            do {
                limits.limits[kind] = try RateLimit.parse(try config.required(key))
            } catch let error as RateLimitSyntaxError {
                throw ConfigError(message: "\(key.env) (\(key.flag)): \(error)")
            }
        }
        return limits
    }

    /// `GATEHOUSE_PUBLIC_URL`, else `http://HOST:PORT`.
    static func publicURL(_ config: Config) throws -> String {
        if let url = config.string(ConfigTable.publicURL), !url.isEmpty {
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw ConfigError(message: "GATEHOUSE_PUBLIC_URL (--public-url) must start with http:// or https://, not '\(url)'")
            }
            return url.hasSuffix("/") ? String(url.dropLast()) : url
        }
        return "http://\(try config.required(ConfigTable.httpHost)):\(try config.int(ConfigTable.httpPort, in: 0...65_535))"
    }
}

/// The running gateway: its HTTP application (a `Service`) and its RPC clients.
public struct GatewayRole: Sendable {
    /// The HTTP server; run it in the role's service group.
    public let application: any Service
    /// The identity service's client; close it at shutdown.
    public let identity: BalancedRPCClient
    /// The token service's client; close it at shutdown.
    public let tokens: BalancedRPCClient

    /// Connects the RPC clients and builds the HTTP application, which listens once run.
    public static func start(_ settings: GatewayRoleSettings, clock: WallClock = .system, logger: Logger) throws -> GatewayRole {
        let start = RoleStart(links: settings.links, rpcTimeout: settings.rpcTimeout, logger: logger)
        let identity = try start.client(settings.identityURL) { $0.identityServerKey }
        let tokens = try start.client(settings.tokenURL) { $0.tokenServerKey }
        let curve = settings.links.curve
        let metrics = GatewayMetrics()
        let eventsURL = settings.tokenEventsURL
        let eventsCurve = curve?.client(of: curve?.tokenServerKey)
        let changesURL = settings.identityEventsURL
        let changesCurve = curve?.client(of: curve?.identityServerKey)
        // Every call carries a deadline: the clients' default timeout, which is the gateway's
        // request timeout (`GATEHOUSE_RPC_TIMEOUT_MS`), or a shorter one given per call.
        let services = GatewayServices(
            identity: TimedCaller(identity.caller, service: "identity", metrics: metrics),
            tokens: TimedCaller(tokens.caller, service: "token", metrics: metrics),
            revocations: { RevocationSubscription.stream(endpoint: eventsURL, curve: eventsCurve, logger: logger) },
            enforcesDeadlines: true,
            userChanges: { ChangeSubscription.stream(endpoint: changesURL, curve: changesCurve, logger: logger) })
        let application = buildGateway(configuration: settings.gateway, services: services, logger: logger, metrics: metrics, clock: clock)
        logger.info("gateway on http://\(settings.gateway.host):\(settings.gateway.port) → identity \(settings.identityURL), token \(settings.tokenURL)")
        return GatewayRole(application: application, identity: identity, tokens: tokens)
    }
}
