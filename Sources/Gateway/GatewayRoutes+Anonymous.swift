import GatehouseContracts
import Hummingbird

extension GatewayRoutes {
    /// `POST /v1/accounts/anonymous`: a new anonymous user and a session for it, in one call.
    /// No body is read (any sent is ignored). Rate-limited per client address
    /// (`GATEHOUSE_RATE_LIMIT_ANONYMOUS_SIGN_UP`).
    @Sendable func signInAnonymously(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = try admitClient(.anonymousSignUp, request, context)
        let reply = try await call(services.identity, IdentityAPI.signInAnonymously, SignInAnonymouslyRequest(client: client.info))
        return Self.json(.created, reply.json, noStore: true)
    }
}
