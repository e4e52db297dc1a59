public import GatehouseSupport
import GatehouseContracts
public import Hummingbird
import NIOCore
public import Logging
import RPCRouting

/// Builds the HTTP gateway. Run the result in a `ServiceGroup` (it is a `Service`): it serves
/// until graceful shutdown, letting in-flight requests finish. The revocation feed's consumer
/// (`RevocationFeedService`: the snapshot at start and after missed events, then the events) runs
/// as one of its services; authenticated requests wait for its first snapshot.
///
/// - Parameters:
///   - configuration: bind address, limits, token issuer/audience, CORS origins.
///   - services: the identity and token services.
///   - logger: the access log and errors go here.
///   - metrics: the Prometheus registry served at `/metrics`; pass one to share it with the RPC adapters.
///   - clock: the wall clock (token expiry, rate limits); `.system` but in end-to-end tests.
public func buildGateway(
    configuration: GatewayConfiguration,
    services: GatewayServices,
    logger: Logger,
    metrics: GatewayMetrics = GatewayMetrics(),
    clock: WallClock = .system
) -> some ApplicationProtocol {
    makeGateway(configuration: configuration, services: services, logger: logger, metrics: metrics, clock: clock).application
}

/// The parts of a gateway, for tests.
struct GatewayParts {
    var application: Application<RouterResponder<GatewayRequestContext>>
    var routes: RouteTable
    var jwks: JWKSCache
    var revoked: RevocationList
    var admission: ConnectionAdmission
    var revocations: RevocationState
    var streams: StreamHub
}

func makeGateway(
    configuration: GatewayConfiguration,
    services: GatewayServices,
    logger: Logger,
    metrics: GatewayMetrics,
    clock: WallClock
) -> GatewayParts {
    let jwks = JWKSCache(
        fetch: { [timeout = configuration.requestTimeout] in
            try await withBackendTimeout(timeout) { try await services.tokens.call(TokenAPI.jwks, Empty()).json }
        },
        clock: clock, ttl: configuration.jwksCacheTTL,
        minRefetchInterval: configuration.jwksMinRefetchInterval)
    // A token is accepted until `exp` plus the leeway, so its session stays listed that long.
    let revoked = RevocationList(ttl: configuration.maxAccessTokenTTL + configuration.clockLeeway, capacity: configuration.maxRevokedSessions)
    let revocations = RevocationState(list: revoked)
    var verifier = BearerVerifier(
        jwks: jwks, revocations: revocations, issuer: configuration.issuer, audience: configuration.audience,
        leeway: configuration.clockLeeway.seconds, clock: clock, revocationWait: configuration.requestTimeout)
    verifier.confirmNotRevoked = { [timeout = configuration.requestTimeout] token in
        do {
            _ = try await withBackendTimeout(timeout) {
                try await services.tokens.call(TokenAPI.verifyAccessToken, VerifyRequest(token: token, checkRevoked: true))
            }
        } catch let error as RPCError where error.code == .sessionRevoked {
            throw GatewayError.invalidToken(.sessionRevoked, "The session has been revoked.")
        } catch let error as RPCError where error.code == .invalidToken || error.code == .tokenExpired {
            throw GatewayError.invalidToken()
        } catch {
            throw GatewayError.serviceUnavailable
        }
    }
    let streams = StreamHub(
        settings: configuration.streams, metrics: StreamMetrics(registry: metrics.registry), clock: clock, revoked: revoked, logger: logger)
    let routes = GatewayRoutes(
        services: services, configuration: configuration, verifier: verifier, jwks: jwks, revocations: revocations, metrics: metrics,
        clock: clock, passwordRequests: InFlightLimit(limit: configuration.maxPasswordRequests),
        limiter: ClientRateLimiter(configuration.rateLimits, clock: clock), streams: streams)

    let endpoints = routes.endpoints()
    var table = RouteTable(logger: logger)
    for endpoint in endpoints { table.add(endpoint.method, endpoint.path) }

    let router = Router(context: GatewayRequestContext.self)
    router.add(middleware: EdgeMiddleware(metrics: metrics, routes: table))
    router.add(middleware: CORSMiddleware(allowedOrigins: Set(configuration.allowedOrigins), routes: table))
    for endpoint in endpoints {
        router.on(RouterPath(endpoint.path), method: endpoint.method, use: endpoint.handler)
    }

    var feed = RevocationFeedService(
        subscribe: services.revocations,
        load: { [timeout = configuration.requestTimeout] in
            try await withBackendTimeout(timeout) { try await services.tokens.call(TokenAPI.listRevocations, Empty()) }
        },
        state: revocations, heartbeat: configuration.revocationHeartbeat, clock: clock, logger: logger)
    feed.onRevoked = { event in streams.revoked(sessionID: event.sessionID, userID: event.userID, reason: event.reason) }
    let changeFeed = ChangeFeedService(
        subscribe: services.userChanges,
        list: { [timeout = configuration.requestTimeout] after in
            try await withBackendTimeout(timeout) {
                try await services.identity.call(IdentityAPI.listChanges, ListChangesRequest(afterSeq: after, limit: IdentityAPI.maxChangesPage))
            }
        },
        hub: streams, heartbeat: configuration.streams.changeFeedHeartbeat, logger: logger)
    let admission = ConnectionAdmission(
        maxTotal: configuration.maxConnections,
        maxPerAddress: configuration.maxConnectionsPerAddress,
        exempt: { [proxies = configuration.trustedProxies] in proxies.isTrusted(peer: $0) })
    let timeouts = ConnectionTimeouts(
        head: TimeAmount(configuration.headTimeout), body: TimeAmount(configuration.bodyTimeout),
        idle: TimeAmount(configuration.idleTimeout))
    let application = Application(
        router: router,
        server: GatewayHTTPChannel.builder(
            timeouts: timeouts, admission: admission, metrics: ConnectionMetrics(registry: metrics.registry), logger: logger),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port)),
        services: [feed, streams, changeFeed],
        logger: logger
    )
    return GatewayParts(application: application, routes: table, jwks: jwks, revoked: revoked, admission: admission, revocations: revocations,
        streams: streams)
}
