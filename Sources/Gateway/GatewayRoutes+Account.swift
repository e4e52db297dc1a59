import Foundation
import GatehouseContracts
import GatehouseSupport
import Hummingbird

/// The self-service account routes (issue 18 §4–§6): re-authentication, password and email
/// changes, deleting one's own account. Each authenticates the bearer token and passes its
/// `sub`, `sid` and `auth_time` to the identity service, which applies the recent-login window.
/// Every session a call revoked (committed in the token service before the identity service
/// answers) is refused here before the HTTP answer.
extension GatewayRoutes {
    /// `{email?, password}` (the email defaults to the caller's own), or
    /// `{provider, idToken, nonce?}` for a user with a linked provider.
    struct ReauthenticateBody: FlatJSONDecodable {
        var email: String?
        var password: String
        var provider: String?
        var idToken: String?
        var nonce: String?

        init?(flat members: [String: String?]) {
            (self.provider, self.idToken, self.nonce) = (members["provider"] ?? nil, members["idToken"] ?? nil, members["nonce"] ?? nil)
            if provider != nil {
                (self.email, self.password) = (nil, "")
                return
            }
            guard let password = members["password"] ?? nil else { return nil }
            (self.email, self.password) = (members["email"] ?? nil, password)
        }
    }

    /// `{email}`.
    struct EmailBody: FlatJSONDecodable {
        var email: String

        init?(flat members: [String: String?]) {
            guard let email = members["email"] ?? nil else { return nil }
            self.email = email
        }
    }

    /// The caller of a self-service method, from its verified access token (a token without
    /// `auth_time` counts as authenticated long ago: it never passes the recent-login gate).
    static func caller(_ claims: AccessTokenClaims) -> AuthenticatedCaller {
        AuthenticatedCaller(userID: claims.sub, sessionID: claims.sid, authTime: claims.authTime ?? Date(timeIntervalSince1970: 0))
    }

    /// `POST /v1/me/reauthenticate`: a new session with a fresh `auth_time` replacing the
    /// presented one (refused here from now on). Limited per address like sign-in, and throttled
    /// per account by the identity service on the sign-in keys.
    @Sendable func reauthenticate(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let client = try admitClient(.signIn, request, context)
        let body = try await request.jsonBody(ReauthenticateBody.self, limit: configuration.maxBodySize)
        if let provider = body.provider {
            return try await reauthenticateWithProvider(claims, provider: provider, idToken: body.idToken, nonce: body.nonce, client: client.info)
        }
        if let email = body.email { try Self.validateEmail(email) }
        try Self.validatePassword(body.password)
        return try await withPasswordPlace {
            let reauth = ReauthenticateRequest(caller: Self.caller(claims), email: body.email, password: body.password, client: client.info)
            let reply = try await countingAccountThrottle(.signIn) { try await call(services.identity, IdentityAPI.reauthenticate, reauth) }
            revocations.insert(CollectionOfOne(claims.sid), now: clock.now)
            return Self.json(.ok, reply.json, noStore: true)
        }
    }

    /// `PUT /v1/me/password`: sets the password (recent login required); the user's other
    /// sessions are revoked, this one continues. Limited per address like sign-up (a new hash).
    @Sendable func changePassword(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let client = try admitClient(.signUp, request, context).info
        let body = try await request.jsonBody(PasswordBody.self, limit: configuration.maxBodySize)
        try Self.validatePassword(body.password)
        return try await withPasswordPlace {
            let change = ChangePasswordRequest(caller: Self.caller(claims), password: body.password, client: client)
            let reply = try await call(services.identity, IdentityAPI.changePassword, change)
            revocations.insert(reply.revokedSessionIDs, now: clock.now)
            return Self.json(.ok, reply.user.publicView, noStore: true)
        }
    }

    /// `DELETE /v1/me[?continueAnonymously=true]`: deletes the account (recent login required
    /// unless anonymous): `204`, or `201` with `{user, session}` of a new anonymous user (limited
    /// per address like anonymous sign-ups). Every session of the deleted user is refused here
    /// before the answer.
    @Sendable func deleteMe(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let continueAnonymously: Bool
        switch request.uri.queryParameters["continueAnonymously"] {
        case nil, "false": continueAnonymously = false
        case "true": continueAnonymously = true
        default: throw GatewayError.invalidArgument("`continueAnonymously` must be true or false.")
        }
        let client = identifyClient(request, context)
        if continueAnonymously { try admit(.anonymousSignUp, client.address) }
        let delete = DeleteAccountRequest(caller: Self.caller(claims), continueAnonymously: continueAnonymously, client: client.info)
        let reply = try await call(services.identity, IdentityAPI.deleteAccount, delete)
        revocations.insert([claims.sid] + reply.revokedSessionIDs, now: clock.now)
        if let anonymous = reply.anonymous { return Self.json(.created, anonymous.json, noStore: true) }
        return Response(status: .noContent)
    }
}
