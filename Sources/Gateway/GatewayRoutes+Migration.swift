import GatehouseContracts
import GatehouseSupport
import Hummingbird
import RPCRouting

// Upgrading an anonymous user in place and migrating one to an existing account (issue 18 §2,
// §3): `POST /v1/me/upgrade`, `POST /v1/sessions/resume`, and what `POST /v1/sessions` does with
// an anonymous caller's bearer token.
extension GatewayRoutes {
    struct ResumeBody: Decodable {
        var resumeHandle: String
        var allowMigration: Bool
    }

    /// `POST /v1/me/upgrade` (bearer of an anonymous user) `{email, password, displayName?}`: the
    /// same user gets the email and password and is no longer anonymous; 200 `{user, session}`
    /// with a new session. Rate-limited as sign-up; holds a password-hashing place.
    @Sendable func upgradeAnonymous(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = try admitClient(.signUp, request, context)
        let claims = try await authenticate(request)
        let body = try await credentials(request, SignUpBody.self)
        if let name = body.displayName { try Self.validateDisplayName(name) }
        return try await withPasswordPlace {
            let upgrade = UpgradeAnonymousRequest(
                caller: Self.caller(claims), email: body.email, password: body.password, displayName: body.displayName, client: client.info,
                locale: Self.mailLocale(request.headers[.acceptLanguage]))
            let reply = try await call(services.identity, IdentityAPI.upgradeAnonymous, upgrade)
            return Self.json(.ok, reply.json, noStore: true)
        }
    }

    /// `POST /v1/sessions/resume` (bearer of the anonymous session that got the handle)
    /// `{resumeHandle, allowMigration}`: the sign-in that answered `migration_required`, finished
    /// without the credentials; 200 `{user, session, migration}`. Rate-limited as sign-in.
    @Sendable func resumeSignIn(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = try admitClient(.signIn, request, context)
        let claims = try await authenticate(request)
        let body = try await request.jsonBody(ResumeBody.self, limit: configuration.maxBodySize)
        guard !body.resumeHandle.isEmpty, body.resumeHandle.utf8.count <= 128 else {
            throw GatewayError(.invalidResumeHandle, detail: "The resume handle is unknown, expired or already used: sign in again.")
        }
        let resume = ResumeSignInRequest(
            caller: Self.caller(claims), resumeHandle: body.resumeHandle, allowMigration: body.allowMigration, client: client.info)
        let reply = try await migrating(claims) { try await call(services.identity, IdentityAPI.resumeSignIn, resume) }
        return Self.json(.ok, reply.json, noStore: true)
    }

    /// The caller a sign-in passes on: the verified bearer token's user when the token says it
    /// is anonymous (the identity service checks that it still is); nil without an
    /// `Authorization` header or for any other user. A header that does not verify is refused
    /// as on any authenticated route.
    func anonymousSignInCaller(_ request: Request) async throws -> AccessTokenClaims? {
        guard request.headers[.authorization] != nil else { return nil }
        let claims = try await authenticate(request)
        return claims.isAnonymous == true ? claims : nil
    }

    /// Runs a call that may migrate the anonymous user of `claims`: the deleted user's sessions
    /// (committed in the token service) are refused here before the answer, whatever happens to
    /// their events; so is the caller's session when its user was deleted meanwhile.
    func migrating(_ claims: AccessTokenClaims?, _ body: () async throws -> AuthResponse) async throws -> AuthResponse {
        let reply: AuthResponse
        do {
            reply = try await body()
        } catch let error as RPCError where error.code == .sessionRevoked {
            if let claims { revocations.insert(CollectionOfOne(claims.sid), now: clock.now) }
            throw error
        }
        if let migration = reply.migration {
            revocations.insert(migration.revokedSessionIDs + (claims.map { [$0.sid] } ?? []), now: clock.now)
        }
        return reply
    }

    /// `SignInRequest` of a sign-in body, with the anonymous caller and its decision when there is one.
    static func signInRequest(_ body: SignInBody, client: ClientInfo, caller claims: AccessTokenClaims?) -> SignInRequest {
        guard let claims else { return SignInRequest(email: body.email, password: body.password, client: client) }
        return SignInRequest(
            email: body.email, password: body.password, client: client, caller: Self.caller(claims), allowMigration: body.allowMigration)
    }
}

extension MigrationOutcome {
    /// `{oldUserId, newUserId, performMigration}` (the revoked session ids stay in the gateway).
    var json: [UInt8] {
        var w = JSONObjectWriter()
        w.string("oldUserId", oldUserID)
        w.string("newUserId", newUserID)
        w.bool("performMigration", performMigration)
        return w.finish()
    }
}
