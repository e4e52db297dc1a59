import GatehouseContracts
import GatehouseSupport
public import Hummingbird
import HTTPTypes
public import Logging
import NIOCore
public import RPCRouting

/// Where the admin listener binds and what it calls (issue 22 §1). It is its own HTTP server,
/// never routed from the public gateway's port; the identity role runs it beside its service.
public struct AdminAPIConfiguration: Sendable {
    /// The address to bind (`GATEHOUSE_ADMIN_HOST`, loopback by default).
    public var host: String
    /// The port (`GATEHOUSE_ADMIN_PORT`).
    public var port: Int
    /// Each backend call's deadline.
    public var requestTimeout: Duration
    /// The largest request body.
    public var maxBodySize: Int
    /// Most open connections.
    public var maxConnections: Int

    /// A listener on `host:port`.
    public init(host: String = "127.0.0.1", port: Int = 8081, requestTimeout: Duration = .seconds(5), maxBodySize: Int = 65_536, maxConnections: Int = 64) {
        self.host = host
        self.port = port
        self.requestTimeout = requestTimeout
        self.maxBodySize = maxBodySize
        self.maxConnections = maxConnections
    }
}

/// Builds the admin listener: `/admin/v1/...` authenticated by admin API keys
/// (`Authorization: Bearer gha_<id>.<secret>`, checked with `identity.authenticateAdminKey` at
/// every request, so a revoked key is refused at once), each route needing one scope, answering
/// problem+json errors from the one error table. `identity` is the identity service (in process,
/// its own key), `tokens` the token service as the identity service reaches it.
public func buildAdminAPI(
    configuration: AdminAPIConfiguration, identity: any RPCCaller, tokens: any RPCCaller, logger: Logger
) -> some ApplicationProtocol {
    makeAdminAPI(configuration: configuration, identity: identity, tokens: tokens, logger: logger).application
}

/// The parts of the admin listener, for tests.
struct AdminAPIParts {
    var application: Application<RouterResponder<GatewayRequestContext>>
    var routes: RouteTable
}

func makeAdminAPI(configuration: AdminAPIConfiguration, identity: any RPCCaller, tokens: any RPCCaller, logger: Logger) -> AdminAPIParts {
    let routes = AdminRoutes(identity: identity, tokens: tokens, configuration: configuration, logger: logger)
    if !["127.0.0.1", "::1", "localhost"].contains(configuration.host) {
        logger.warning(
            "the admin API listens on \(configuration.host):\(configuration.port), beyond loopback, in plain HTTP: keep it on a private network behind TLS (deploy/README.md, \"Administering users\")")
    }
    var table = RouteTable(logger: logger)
    let endpoints = routes.endpoints()
    for endpoint in endpoints { table.add(endpoint.method, endpoint.path) }
    let metrics = GatewayMetrics()
    let router = Router(context: GatewayRequestContext.self)
    router.add(middleware: EdgeMiddleware(metrics: metrics, routes: table))
    for endpoint in endpoints {
        router.on(RouterPath(endpoint.path), method: endpoint.method, use: endpoint.handler)
    }
    let application = Application(
        router: router,
        server: GatewayHTTPChannel.builder(
            timeouts: ConnectionTimeouts(head: .seconds(10), body: .seconds(30), idle: .seconds(60)),
            admission: ConnectionAdmission(maxTotal: configuration.maxConnections, maxPerAddress: configuration.maxConnections, exempt: { _ in false }),
            metrics: ConnectionMetrics(registry: metrics.registry), logger: logger),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port)),
        logger: logger)
    return AdminAPIParts(application: application, routes: table)
}

/// The admin listener's routes.
struct AdminRoutes: Sendable {
    typealias Handler = @Sendable (Request, GatewayRequestContext) async throws -> Response
    let identity: any RPCCaller
    let tokens: any RPCCaller
    let configuration: AdminAPIConfiguration
    let logger: Logger

    func endpoints() -> [(method: HTTPRequest.Method, path: String, handler: Handler)] {
        [
            (.get, "/admin/v1/users", listUsers),
            (.post, "/admin/v1/users/import", importUsers),
            (.get, "/admin/v1/users/export", exportUsers),
            (.post, "/admin/v1/users", createUser),
            (.get, "/admin/v1/users/:id", getUser),
            (.patch, "/admin/v1/users/:id", updateUser),
            (.delete, "/admin/v1/users/:id", deleteUser),
            (.get, "/admin/v1/users/:id/sessions", listSessions),
            (.delete, "/admin/v1/users/:id/sessions", revokeSessions),
            (.put, "/admin/v1/users/:id/claims", setClaims),
            (.post, "/admin/v1/users/:id/links", generateLink),
            (.get, "/admin/v1/audit", listAudit),
            (.post, "/admin/v1/signing-keys/rotate", rotateSigningKeys),
            (.get, "/admin/openapi.json", openAPI),
        ]
    }

    // MARK: Helpers

    /// The key presented, checked by the identity service, holding `scope`: the audit actor
    /// `admin_key:<id>`. 401 `invalid_admin_key` without a valid key, 403 `insufficient_scope`.
    func authorize(_ request: Request, _ scope: String) async throws -> String {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer "), header.utf8.count <= 128 else {
            throw GatewayError(.invalidAdminKey, detail: "An admin API key is required: Authorization: Bearer gha_<id>.<secret>.")
        }
        let token = String(header.dropFirst("Bearer ".count))
        let key: AdminKey
        do {
            key = try await call(identity, IdentityAPI.authenticateAdminKey, AuthenticateAdminKeyRequest(token: token))
        } catch let error as RPCError where error.code == .invalidAdminKey {
            // The id part only (never the secret), so probing shows in the log.
            let id = token.hasPrefix("gha_") ? String(token.dropFirst(4).prefix(16).filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) : "-"
            logger.notice("admin API key refused", metadata: ["keyId": "\(id)", "path": "\(request.uri.path.prefix(128))"])
            throw error
        }
        guard key.scopes.contains(scope) else {
            throw GatewayError(.insufficientScope, detail: "This key (\(key.name)) lacks the scope \(scope).")
        }
        return AuditEvent.Actor.adminKey(key.id)
    }

    /// One call within the configured timeout.
    func call<Req, Res>(_ service: any RPCCaller, _ method: RPCMethod<Req, Res>, _ request: Req) async throws -> Res {
        try await withBackendTimeout(configuration.requestTimeout) { try await service.call(method, request) }
    }

    /// The `:id` of the path.
    static func userID(_ context: GatewayRequestContext) throws -> String {
        guard let id = context.parameters.get("id"), !id.isEmpty, id.utf8.count <= 64 else { throw GatewayError.notFound }
        return id
    }

    static func json(_ status: HTTPResponse.Status, _ bytes: [UInt8]) -> Response {
        GatewayRoutes.json(status, bytes, noStore: true)
    }

    @Sendable func openAPI(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        GatewayRoutes.json(.ok, Array(AdminOpenAPIDocument.json.utf8))
    }
}
