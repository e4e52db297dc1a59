/// Settings of the HTTP gateway. Every field has a safe default except the token `issuer`,
/// `audience` and `publicBaseURL`, which must match the token service's configuration.
public struct GatewayConfiguration: Sendable {
    /// Address to bind. Default `127.0.0.1`.
    public var host: String
    /// Port to bind. Default 8080; 0 picks a free port.
    public var port: Int
    /// Largest accepted request body in bytes. Default 64 KiB; larger bodies get 413 `payload_too_large`.
    public var maxBodySize: Int
    /// Origins (`https://app.example.com`) allowed to call the API from a browser. Default none.
    public var allowedOrigins: [String]
    /// Expected `iss` claim of access tokens, also the OpenID `issuer`.
    public var issuer: String
    /// Expected `aud` claim of access tokens.
    public var audience: String
    /// The gateway's public base URL (no trailing slash), used to build `jwks_uri`.
    public var publicBaseURL: String
    /// The proxies whose `X-Forwarded-For` names the client: for a request from one of them, the
    /// client is the rightmost forwarded address that is not itself a trusted proxy. Default none
    /// (the client is the TCP peer).
    public var trustedProxies: TrustedProxies
    /// Per-client-address limits of sign-up, sign-in, password strength and refresh (429
    /// `rate_limited`). Default `RateLimits.defaults`.
    public var rateLimits: RateLimits
    /// How long a request may wait for the backend. Default 2 s; then 503 `service_unavailable`.
    public var requestTimeout: Duration
    /// Leeway for `exp`/`iat`/`nbf` checks. Default 10 s.
    public var clockLeeway: Duration
    /// The longest access-token lifetime the token service issues; revoked session ids are kept this long. Default 15 min.
    public var maxAccessTokenTTL: Duration
    /// Minimum time between two JWKS fetches caused by unknown `kid`s. Default 5 s.
    public var jwksMinRefetchInterval: Duration
    /// How long the JWKS document is served from cache. Default 60 s.
    public var jwksCacheTTL: Duration
    /// Most revoked session ids remembered at once (oldest dropped first). Default 100 000.
    public var maxRevokedSessions: Int
    /// The token service's heartbeat interval. A feed silent for three intervals is polled with
    /// `token.listRevocations` every three intervals until it speaks again. Default 1 s.
    public var revocationHeartbeat: Duration = .seconds(1)
    /// The app's name at the top of the action pages (`GET /actions`; `GATEHOUSE_APP_NAME`, as in
    /// mails). Default `Gatehouse`.
    public var appName: String = "Gatehouse"
    /// Most sign-ups and sign-ins (the requests that hash a password) this gateway lets through at
    /// once. Past it the gateway answers 503 `overloaded` with `Retry-After` before reading the
    /// body, so refusing the excess of a burst costs almost nothing and leaves the cores to the
    /// hashing threads. Default 128 (the identity service's own bound is its hash queue, 64 by
    /// default, plus one job per core).
    public var maxPasswordRequests: Int
    /// Longest wait for a whole request head: from accepting a connection for its first request,
    /// from the first byte for later ones. Default 10 s; then 408 `request_timeout` (or just a
    /// close when nothing was sent) and the connection is closed.
    public var headTimeout: Duration
    /// Longest wait for a whole request body, from its head. Default 30 s; then 408 `request_timeout`.
    public var bodyTimeout: Duration
    /// Longest wait for the next request on a kept-alive connection. Default 60 s; then it is closed.
    public var idleTimeout: Duration
    /// Most open HTTP connections. Default 10 000; past it a new connection is answered 503
    /// `too_many_connections` and closed.
    public var maxConnections: Int
    /// Most open HTTP connections from one peer address. Default 256; 0 means no per-address cap
    /// (not applied to trusted proxies, whose connections carry many clients).
    public var maxConnectionsPerAddress: Int
    /// `GET /v1/me/events`: heartbeat, caps, expiry notice, buffer (`StreamSettings`).
    public var streams = StreamSettings()

    /// A configuration with the defaults above; `issuer`,
    /// `audience` and `publicBaseURL` must be given.
    public init(
        host: String = "127.0.0.1",
        port: Int = 8080,
        maxBodySize: Int = 64 * 1024,
        allowedOrigins: [String] = [],
        issuer: String,
        audience: String,
        publicBaseURL: String,
        trustedProxies: TrustedProxies = .none,
        rateLimits: RateLimits = .defaults,
        requestTimeout: Duration = .seconds(2),
        clockLeeway: Duration = .seconds(10),
        maxAccessTokenTTL: Duration = .seconds(15 * 60),
        jwksMinRefetchInterval: Duration = .seconds(5),
        jwksCacheTTL: Duration = .seconds(60),
        maxRevokedSessions: Int = 100_000,
        maxPasswordRequests: Int = 128,
        headTimeout: Duration = .seconds(10),
        bodyTimeout: Duration = .seconds(30),
        idleTimeout: Duration = .seconds(60),
        maxConnections: Int = 10_000,
        maxConnectionsPerAddress: Int = 256
    ) {
        self.maxPasswordRequests = maxPasswordRequests
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
        self.host = host
        self.port = port
        self.maxBodySize = maxBodySize
        self.allowedOrigins = allowedOrigins
        self.issuer = issuer
        self.audience = audience
        self.publicBaseURL = publicBaseURL
        self.trustedProxies = trustedProxies
        self.rateLimits = rateLimits
        self.requestTimeout = requestTimeout
        self.clockLeeway = clockLeeway
        self.maxAccessTokenTTL = maxAccessTokenTTL
        self.jwksMinRefetchInterval = jwksMinRefetchInterval
        self.jwksCacheTTL = jwksCacheTTL
        self.maxRevokedSessions = maxRevokedSessions
    }
}
