import Foundation
import Synchronization
import GatehouseContracts
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import GatehouseSupport
import RPCRouting

/// The HTTP API: each handler validates input at the edge and makes one call of the contract.
struct GatewayRoutes: Sendable {
    let services: GatewayServices
    let configuration: GatewayConfiguration
    let verifier: BearerVerifier
    let jwks: JWKSCache
    let revocations: RevocationState
    let metrics: GatewayMetrics
    let clock: WallClock
    /// Sign-ups and sign-ins in flight (`configuration.maxPasswordRequests`).
    let passwordRequests: InFlightLimit
    /// Per-client-address budgets (`configuration.rateLimits`).
    let limiter: ClientRateLimiter
    /// The open `GET /v1/me/events` streams.
    let streams: StreamHub

    // MARK: Request bodies

    /// A body that carries an email and a password.
    protocol CredentialsBody: FlatJSONDecodable {
        var email: String { get }
        var password: String { get }
    }

    struct SignUpBody: CredentialsBody {
        var email: String
        var password: String
        var displayName: String?

        init?(flat members: [String: String?]) {
            guard let email = members["email"] ?? nil, let password = members["password"] ?? nil else { return nil }
            (self.email, self.password, self.displayName) = (email, password, members["displayName"] ?? nil)
        }
    }
    struct SignInBody: CredentialsBody {
        var email: String
        var password: String
        /// An anonymous caller's migration decision (a JSON boolean; absent or null: none).
        var allowMigration: Bool?

        init?(flat members: [String: String?]) {
            guard let email = members["email"] ?? nil, let password = members["password"] ?? nil else { return nil }
            // A string where a boolean belongs: `JSONDecoder` reports the wrong type.
            guard (members["allowMigration"] ?? nil) == nil else { return nil }
            (self.email, self.password) = (email, password)
        }
    }
    struct RefreshBody: FlatJSONDecodable {
        var refreshToken: String

        init?(flat members: [String: String?]) {
            guard let token = members["refreshToken"] ?? nil else { return nil }
            refreshToken = token
        }
    }
    struct ProfileBody: Decodable {
        var displayName: String?
        var photoURL: String?
        var settings: JSONObjectShape?
    }
    struct PasswordBody: FlatJSONDecodable {
        var password: String

        init?(flat members: [String: String?]) {
            guard let password = members["password"] ?? nil else { return nil }
            self.password = password
        }
    }

    // MARK: Registration

    typealias Handler = @Sendable (Request, GatewayRequestContext) async throws -> Response

    /// Every endpoint: method, path and handler. The router, the 405 table and the OpenAPI
    /// check are all built from this one list.
    func endpoints() -> [(method: HTTPRequest.Method, path: String, handler: Handler)] {
        [
            (.post, "/v1/accounts", signUp),
            (.post, "/v1/accounts/anonymous", signInAnonymously),
            (.post, "/v1/sessions", signIn),
            (.post, "/v1/sessions/resume", resumeSignIn),
            (.post, "/v1/sessions/provider", signInWithProvider),
            (.post, "/v1/providers/apple/notifications", appleNotification),
            (.post, "/v1/sessions/refresh", refresh),
            (.delete, "/v1/sessions/current", signOut),
            (.delete, "/v1/sessions", signOutEverywhere),
            (.get, "/v1/me", getMe),
            (.patch, "/v1/me", patchMe),
            (.delete, "/v1/me", deleteMe),
            (.post, "/v1/me/reauthenticate", reauthenticate),
            (.put, "/v1/me/password", changePassword),
            (.put, "/v1/me/email", changeEmail),
            (.post, "/v1/me/upgrade", upgradeAnonymous),
            (.post, "/v1/me/providers", linkProvider),
            (.delete, "/v1/me/providers/:provider", unlinkProvider),
            (.post, "/v1/password-strength", passwordStrength),
            (.post, "/v1/password-reset", requestPasswordReset),
            (.post, "/v1/password-reset/confirm", confirmPasswordReset),
            (.post, "/v1/email-change/confirm", confirmEmailChange),
            (.post, "/v1/email-change/revert", revertEmailChange),
            (.post, "/v1/me/email-verification", sendEmailVerification),
            (.post, "/v1/email-verification", requestEmailVerification),
            (.post, "/v1/email-verification/confirm", confirmEmailVerification),
            (.get, "/actions", actionPage),
            (.post, "/actions", submitAction),
            (.get, "/.well-known/jwks.json", jwksDocument),
            (.get, "/.well-known/openid-configuration", openIDConfiguration),
            (.get, "/healthz", healthz),
            (.get, "/readyz", readyz),
            (.get, "/metrics", metricsText),
            (.get, "/openapi.json", openAPI),
            (.get, "/v1/me/events", events),
        ]
    }

    // MARK: Accounts and sessions

    @Sendable func signUp(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = try admitClient(.signUp, request, context)
        // The body is read and checked before a hashing place is taken: a client that sends
        // headers and never the body holds no place.
        let body = try await credentials(request, SignUpBody.self)
        if let name = body.displayName { try Self.validateDisplayName(name) }
        return try await withPasswordPlace {
            let signUp = SignUpRequest(
                email: body.email, password: body.password, displayName: body.displayName, client: client.info,
                locale: Self.mailLocale(request.headers[.acceptLanguage]))
            let reply = try await call(services.identity, IdentityAPI.signUp, signUp)
            return Self.json(.created, reply.json, noStore: true)
        }
    }

    @Sendable func signIn(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = try admitClient(.signIn, request, context)
        let caller = try await anonymousSignInCaller(request)  // nil without a bearer token (GatewayRoutes+Migration)
        let body = try await credentials(request, SignInBody.self)
        return try await withPasswordPlace {
            let signIn = Self.signInRequest(body, client: client.info, caller: caller)
            let reply = try await countingAccountThrottle(.signIn) {
                try await migrating(caller) { try await call(services.identity, IdentityAPI.signIn, signIn) }
            }
            return Self.json(.ok, reply.json, noStore: true)
        }
    }

    /// Runs `body` holding one of the places for requests that hash a password; refused at once
    /// with `overloaded` when `configuration.maxPasswordRequests` are in flight.
    func withPasswordPlace(_ body: () async throws -> Response) async throws -> Response {
        guard passwordRequests.acquire() else { throw GatewayError(.overloaded, detail: ErrorTable.busy) }
        defer { passwordRequests.release() }
        return try await body()
    }

    /// The JSON body of a sign-up or sign-in, its email and password checked for length.
    func credentials<Body: CredentialsBody>(_ request: Request, _ type: Body.Type) async throws -> Body {
        let body = try await request.jsonBody(Body.self, limit: configuration.maxBodySize)
        try Self.validateEmail(body.email)
        try Self.validatePassword(body.password)
        return body
    }

    @Sendable func refresh(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = try admitClient(.refresh, request, context)
        let body = try await request.jsonBody(RefreshBody.self, limit: configuration.maxBodySize)
        guard !body.refreshToken.isEmpty, body.refreshToken.utf8.count <= 512 else {
            throw GatewayError(.invalidRefreshToken, detail: "The refresh token is invalid.")
        }
        let session: SessionTokens
        do {
            session = try await call(services.tokens, TokenAPI.refresh, RefreshRequest(refreshToken: body.refreshToken, client: client.info))
        } catch let error as RPCError {
            // The call revoked a session (reuse, a deleted or disabled user): refuse its access
            // tokens here before answering, whatever happens to the event.
            if let id = error.details[RPCError.sessionIDKey] { revocations.insert(CollectionOfOne(id), now: clock.now) }
            throw error
        }
        var w = JSONObjectWriter()
        w.raw("session", session.json)
        return Self.json(.ok, w.finish(), noStore: true)
    }

    @Sendable func signOut(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        // The revocation is committed once acknowledged; refuse the session here before answering,
        // whether or not its event reaches this gateway.
        let reply = try await call(services.tokens, TokenAPI.revokeSession, RevokeSessionRequest(sessionID: claims.sid, reason: "sign_out"))
        revocations.insert([claims.sid] + reply.sessionIDs, now: clock.now)
        return Response(status: .noContent)
    }

    @Sendable func signOutEverywhere(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let reply = try await call(
            services.tokens, TokenAPI.revokeAllSessions, UserSessionsRequest(userID: claims.sub, reason: "sign_out_everywhere"))
        revocations.insert([claims.sid] + reply.sessionIDs, now: clock.now)
        return Response(status: .noContent)
    }

    // MARK: Profile

    @Sendable func getMe(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let user = try await call(services.identity, IdentityAPI.getUser, UserIDRequest(userID: claims.sub))
        return Self.json(.ok, user.publicView, noStore: true)
    }

    /// How a body `JSONDecoder` has accepted is read again for one member's text: as Foundation
    /// reads (a comma before `}`, nesting to 512), with no byte order mark before the object.
    static let decodedBodies: JSONReader.Options = {
        var options = JSONReader.Options.foundation
        options.byteOrderMark = false
        return options
    }()

    @Sendable func patchMe(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        var request = request
        let (body, raw) = try await request.decodeJSON(ProfileBody.self, limit: configuration.maxBodySize)
        if let name = body.displayName { try Self.validateDisplayName(name) }
        if let url = body.photoURL, url.utf8.count > 2048 {
            throw GatewayError.invalidArgument("`photoURL` must be at most 2048 bytes.")
        }
        // `settings` is a JSON merge patch (RFC 7396), passed on byte for byte as sent (the decoder
        // has checked it is an object); the identity service applies it in the update's transaction.
        var settingsPatch: String?
        if body.settings != nil {
            let bytes = Array(raw.readableBytesView)
            guard let members = try? JSONReader.objectMembers(in: bytes, options: Self.decodedBodies, values: false),
                let patch = members.first(where: { $0.name == "settings" })
            else {
                throw GatewayError.malformed("Wrong type for `settings`: expected an object.")
            }
            settingsPatch = String(decoding: bytes[patch.range], as: UTF8.self)
        }
        let update = UpdateProfileRequest(
            userID: claims.sub, displayName: body.displayName, photoURL: body.photoURL, settingsPatchJSON: settingsPatch)
        let user = try await call(services.identity, IdentityAPI.updateProfile, update)
        return Self.json(.ok, user.publicView, noStore: true)
    }

    @Sendable func passwordStrength(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        _ = try admitClient(.passwordStrength, request, context)
        let body = try await request.jsonBody(PasswordBody.self, limit: configuration.maxBodySize)
        try Self.validatePassword(body.password)
        let strength = try await call(services.identity, IdentityAPI.passwordStrength, PasswordStrengthRequest(password: body.password))
        return Self.json(.ok, strength.json, noStore: true)
    }

    // MARK: Discovery and operations

    @Sendable func jwksDocument(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let document: String
        do {
            document = try await bounded { try await jwks.currentDocument() }
        } catch {
            context.logger.warning("JWKS unavailable", metadata: ["error": .string("\(error)")])
            throw GatewayError.serviceUnavailable
        }
        var response = Self.json(.ok, Array(document.utf8))
        response.headers[.cacheControl] = "public, max-age=300"
        return response
    }

    @Sendable func openIDConfiguration(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        var w = JSONObjectWriter()
        w.string("issuer", configuration.issuer)
        w.string("jwks_uri", configuration.publicBaseURL + "/.well-known/jwks.json")
        w.strings("response_types_supported", ["token"])
        w.strings("subject_types_supported", ["public"])
        w.strings("id_token_signing_alg_values_supported", JWKSCache.allowedAlgorithms.sorted())
        w.strings(
            "claims_supported",
            ["iss", "aud", "sub", "iat", "exp", "jti", "sid", "auth_time", "amr", "email", "email_verified", "is_anonymous"])
        var response = Self.json(.ok, w.finish())
        response.headers[.cacheControl] = "public, max-age=300"
        return response
    }

    @Sendable func healthz(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        Self.json(.ok, Array(#"{"status":"ok"}"#.utf8), noStore: true)
    }

    @Sendable func readyz(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        // Not ready until the revocation state is loaded (and while it is behind the feed).
        let servicesUp = (try? await bounded { await services.ready() }) ?? false
        let ready = servicesUp && revocations.isCurrent
        return ready
            ? Self.json(.ok, Array(#"{"status":"ready"}"#.utf8), noStore: true)
            : Self.json(.serviceUnavailable, Array(#"{"status":"not_ready"}"#.utf8), noStore: true)
    }

    @Sendable func metricsText(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        // The hashing pool lives in the identity service: ask it now, within a short bound, so a
        // scrape is never held up by a service that is down.
        let stats = try? await withBackendTimeout(.milliseconds(250)) { await services.hashPoolStats() }
        metrics.recordHashPool(stats)
        metrics.recordRevocations(revocations)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: metrics.render())))
    }

    @Sendable func openAPI(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        Self.json(.ok, Array(OpenAPIDocument.json.utf8))
    }

    // MARK: Helpers

    func authenticate(_ request: Request) async throws -> AccessTokenClaims {
        try await verifier.verify(authorization: request.headers[.authorization])
    }

    /// One call of the contract on `service`, within the configured timeout.
    func call<Req, Res>(_ service: any RPCCaller, _ method: RPCMethod<Req, Res>, _ request: Req) async throws -> Res {
        if services.enforcesDeadlines { return try await service.call(method, request) }
        return try await withBackendTimeout(configuration.requestTimeout) { try await service.call(method, request) }
    }

    /// Runs `operation` within the configured timeout (a timeout becomes `deadline_exceeded`),
    /// unless every call it makes already carries that deadline.
    func bounded<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        if services.enforcesDeadlines { return try await operation() }
        return try await withBackendTimeout(configuration.requestTimeout, operation)
    }

    static func validateEmail(_ email: String) throws {
        guard !email.isEmpty, email.utf8.count <= 254 else {
            throw GatewayError(.invalidEmail, detail: "`email` must be 1 to 254 bytes.")
        }
    }

    static func validatePassword(_ password: String) throws {
        guard !password.isEmpty, password.utf8.count <= 1024 else {
            throw GatewayError.invalidArgument("`password` must be 1 to 1024 bytes.")
        }
    }

    static func validateDisplayName(_ name: String) throws {
        guard name.count <= 256 else { throw GatewayError.invalidArgument("`displayName` must be at most 256 characters.") }
    }

    static func json(_ status: HTTPResponse.Status, _ bytes: [UInt8], noStore: Bool = false) -> Response {
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if noStore { headers[.cacheControl] = "no-store" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// Runs `operation`, throwing `deadline_exceeded` (and cancelling it) when it takes longer than `timeout`.
func withBackendTimeout<T: Sendable>(_ timeout: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw RPCError(.deadlineExceeded, "the backend did not answer in time")
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

/// A bound on requests in flight: `acquire` takes a place or refuses at once, never waits.
final class InFlightLimit: Sendable {
    let limit: Int
    private let count = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    /// Takes a place; false (and nothing taken) when `limit` are already in flight.
    func acquire() -> Bool {
        if count.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue <= limit { return true }
        count.wrappingSubtract(1, ordering: .acquiringAndReleasing)
        return false
    }

    func release() { count.wrappingSubtract(1, ordering: .acquiringAndReleasing) }

    /// Requests in flight now.
    var current: Int { count.load(ordering: .acquiring) }
}
