import GatehouseContracts
import GatehouseSupport
import HTTPTypes
import Hummingbird

/// Who the client is, and the per-address limits.
extension GatewayRoutes {
    /// The client of a request: its user agent (at most 512 bytes, cut at a character boundary)
    /// and its address: the TCP peer's, or, when the peer is a trusted proxy, the rightmost
    /// `X-Forwarded-For` entry that is not itself one (`TrustedProxies.client`). The address is
    /// nil only when the peer has no IP address.
    func identifyClient(_ request: Request, _ context: GatewayRequestContext) -> (info: ClientInfo, address: IPAddress?) {
        let agent = (request.headers[.userAgent] ?? "").truncated(toUTF8Bytes: 512)
        guard let peer = context.peerIP else { return (ClientInfo(userAgent: agent, ip: ""), nil) }
        let forwarded = configuration.trustedProxies.isEmpty ? [] : request.headers[values: .xForwardedFor]
        let (ip, address) = configuration.trustedProxies.client(peer: peer, forwardedFor: forwarded)
        return (ClientInfo(userAgent: agent, ip: ip), address)
    }

    /// The client as `identifyClient` finds it, once one request of `kind` is taken from its
    /// address's budget (`admit`).
    func admitClient(_ kind: RateLimitClass, _ request: Request, _ context: GatewayRequestContext) throws -> (info: ClientInfo, address: IPAddress?) {
        let client = identifyClient(request, context)
        try admit(kind, client.address)
        return client
    }

    /// Takes one request of `kind` from `address`'s budget, or refuses it with 429 `rate_limited`
    /// and `Retry-After` (counted in `gatehouse_http_throttled_requests_total`). A request without
    /// an address (no IP peer) is not limited.
    func admit(_ kind: RateLimitClass, _ address: IPAddress?) throws {
        guard let address else { return }
        let wait = limiter.admit(kind, address)
        guard wait > 0 else { return }
        metrics.recordThrottled(kind, .clientAddress)
        var error = GatewayError(.rateLimited, detail: "Too many requests from this address; try again after the time in Retry-After.")
        error.headers[.retryAfter] = String(wait)
        throw error
    }

    /// Runs `body`, counting a `too_many_attempts` answer of the identity service against `kind`.
    func countingAccountThrottle<T>(_ kind: RateLimitClass, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as RPCError where error.code == .tooManyAttempts {
            metrics.recordThrottled(kind, .account)
            throw error
        }
    }
}
