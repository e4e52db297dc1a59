import Foundation
import GatehouseContracts
import GatehouseSupport
import Hummingbird

/// Signing in with an identity provider (issue 20): `POST /v1/sessions/provider` (the five cases
/// of seed 002, the bearer token deciding which), `POST /v1/me/providers` (link only),
/// `DELETE /v1/me/providers/{provider}` (unlink), and `POST /v1/me/reauthenticate` with a
/// provider token. The identity service verifies every token; a provider name and user id
/// without a token are refused here (scenario A13).
extension GatewayRoutes {
    /// `{provider, idToken, nonce?, displayName? | fullName?, allowMigration?}`.
    struct ProviderBody: Decodable {
        struct FullName: Decodable {
            var givenName: String?
            var familyName: String?
        }

        var provider: String
        var idToken: String?
        var nonce: String?
        var displayName: String?
        var fullName: FullName?
        var allowMigration: Bool?
        /// Sign in with Apple's authorization code (exchanged when the server has Apple's key).
        var authorizationCode: String?
        /// The web authorization request's `redirect_uri`, for a code of web Sign in with Apple.
        var redirectURI: String?

        /// The name to set: `displayName`, else Apple's name parts joined with a space.
        var name: String? {
            if let displayName { return displayName }
            let parts = [fullName?.givenName, fullName?.familyName].compactMap { $0?.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
            return parts.isEmpty ? nil : parts.joined(separator: " ")
        }
    }

    /// `POST /v1/sessions/provider`: with no bearer token, sign in or sign up (case 5); with an
    /// anonymous user's, link (case 1) or migrate (case 2: `migration_required`, then
    /// `POST /v1/sessions/resume`); with another user's, link (case 3, recent login) or
    /// `credential_already_in_use` (case 4). 200 `{user, session, migration?}`. Rate-limited as sign-in.
    @Sendable func signInWithProvider(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = try admitClient(.signIn, request, context)
        let claims = request.headers[.authorization] == nil ? nil : try await authenticate(request)
        let body = try await providerBody(request)
        let signIn = ProviderSignInRequest(
            credential: try Self.credential(body), caller: claims.map(Self.caller), displayName: body.name,
            allowMigration: body.allowMigration, client: client.info, authorizationCode: try Self.authorizationCode(body),
            redirectURI: body.redirectURI ?? "")
        let reply = try await migrating(claims) { try await call(services.identity, IdentityAPI.signInWithProvider, signIn) }
        return Self.json(.ok, reply.json, noStore: true)
    }

    /// `POST /v1/me/providers` (bearer): links the provider identity to the caller; 200
    /// `{user, session}` with a new session. `credential_already_in_use` when another user has it
    /// (no migration here), `provider_already_linked` when the caller has one of this provider.
    @Sendable func linkProvider(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let client = try admitClient(.signIn, request, context)
        let body = try await providerBody(request)
        let link = ProviderSignInRequest(
            credential: try Self.credential(body), caller: Self.caller(claims), displayName: body.name, client: client.info, linkOnly: true,
            authorizationCode: try Self.authorizationCode(body), redirectURI: body.redirectURI ?? "")
        let reply = try await call(services.identity, IdentityAPI.signInWithProvider, link)
        return Self.json(.ok, reply.json, noStore: true)
    }

    /// `DELETE /v1/me/providers/{provider}` (bearer, recent login): 200 `{user}` without the
    /// provider. `last_sign_in_method` when it is the user's only way to sign in.
    @Sendable func unlinkProvider(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let client = identifyClient(request, context)
        guard let provider = context.parameters.get("provider"), !provider.isEmpty, provider.utf8.count <= 64 else {
            throw GatewayError.notFound
        }
        let unlink = UnlinkProviderRequest(caller: Self.caller(claims), provider: provider, client: client.info)
        let user = try await call(services.identity, IdentityAPI.unlinkProvider, unlink)
        var w = JSONObjectWriter()
        w.raw("user", user.publicView)
        return Self.json(.ok, w.finish(), noStore: true)
    }

    /// `POST /v1/me/reauthenticate` with `{provider, idToken, nonce?}` instead of a password.
    func reauthenticateWithProvider(
        _ claims: AccessTokenClaims, provider: String, idToken: String?, nonce: String?, client: ClientInfo
    ) async throws -> Response {
        let credential = try Self.credential(provider: provider, idToken: idToken, nonce: nonce)
        let reauth = ProviderReauthenticateRequest(caller: Self.caller(claims), credential: credential, client: client)
        let reply = try await call(services.identity, IdentityAPI.reauthenticateWithProvider, reauth)
        revocations.insert(CollectionOfOne(claims.sid), now: clock.now)
        return Self.json(.ok, reply.json, noStore: true)
    }

    /// `POST /v1/providers/apple/notifications`: Apple's server-to-server notifications (no
    /// bearer: the body is a JWS Apple signed, verified by the identity service). 200 once acted
    /// on, so Apple stops retrying; a notification that does not verify is 401
    /// `invalid_provider_token`. The sessions it revoked are refused here before the answer.
    @Sendable func appleNotification(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        _ = try admitClient(.signIn, request, context)
        let body = try await request.body.collect(upTo: min(configuration.maxBodySize, 16 * 1024))
        let reply = try await call(services.identity, IdentityAPI.appleNotification, AppleNotificationRequest(body: Data(body.readableBytesView)))
        if !reply.revokedSessionIDs.isEmpty { revocations.insert(reply.revokedSessionIDs, now: clock.now) }
        return Response(status: .ok)
    }

    /// The body's Apple authorization code ("" without one), of a sane size.
    static func authorizationCode(_ body: ProviderBody) throws -> String {
        guard let code = body.authorizationCode else { return "" }
        guard code.utf8.count <= 1024 else { throw GatewayError.invalidArgument("`authorizationCode` must be at most 1024 bytes.") }
        return code
    }

    /// The body, read within the size limit.
    private func providerBody(_ request: Request) async throws -> ProviderBody {
        let body = try await request.jsonBody(ProviderBody.self, limit: configuration.maxBodySize)
        if let name = body.name { try Self.validateDisplayName(name) }
        return body
    }

    /// The credential of a body: a provider id and an ID token of sane sizes. A body with a
    /// provider user id and no token (seed 001's `oauth_id`) is refused: nothing is trusted
    /// that the provider did not sign.
    static func credential(_ body: ProviderBody) throws -> ProviderCredential {
        try credential(provider: body.provider, idToken: body.idToken, nonce: body.nonce)
    }

    /// `credential(_:)` of the members themselves (re-authentication reads them from its own body).
    static func credential(provider: String, idToken: String?, nonce: String?) throws -> ProviderCredential {
        guard !provider.isEmpty, provider.utf8.count <= 64 else {
            throw GatewayError.invalidArgument("`provider` must be a provider id: apple.com, google.com or oidc.<name>.")
        }
        guard let token = idToken, !token.isEmpty else {
            throw GatewayError.invalidArgument(
                "`idToken` is required: send the provider's ID token (and the raw nonce); a provider user id alone is never trusted.")
        }
        guard token.utf8.count <= 16 * 1024 else { throw GatewayError.invalidArgument("`idToken` must be at most 16 KiB.") }
        let nonce = nonce ?? ""
        guard nonce.utf8.count <= 512 else { throw GatewayError.invalidArgument("`nonce` must be at most 512 bytes.") }
        return ProviderCredential(provider: provider, idToken: token, nonce: nonce)
    }
}
