import GatehouseSupport
import Foundation
import Hummingbird
import Logging
import Synchronization

/// A minimal in-process stand-in for the Gatehouse gateway: the four endpoints, `/healthz`,
/// a route that always fails, and refresh rotation that rejects a reused token with 401.
final class FakeGateway: Sendable {
    struct Faults: OptionSet, Sendable {
        let rawValue: Int
        /// `GET /v1/me` answers 200 with a body that has no `id`.
        static let meWithoutID = Faults(rawValue: 1 << 0)
        /// `POST /v1/sessions/refresh` answers 200 but hands back the presented token (no rotation).
        static let refreshWithoutRotation = Faults(rawValue: 1 << 1)
        /// `POST /v1/accounts` answers 503 overloaded.
        static let signupOverloaded = Faults(rawValue: 1 << 2)
    }

    struct User {
        var id: String
        var email: String
        var password: String
    }

    struct State {
        var users: [String: User] = [:]
        var accessTokens: [String: (userID: String, expires: ContinuousClock.Instant)] = [:]
        var refreshTokens: [String: (userID: String, used: Bool)] = [:]
        var signups = 0
        var signins = 0
        var meCalls = 0
        var refreshes = 0
        var reusedRefreshTokens = 0
        var expiredAccessTokens = 0
        var healthz = 0
        /// Provider sign-ins: the subjects' users, the tokens' `jti`s and the tokens themselves.
        var providerUsers: [String: User] = [:]
        var providerJTIs: Set<String> = []
        var providerTokens: [String] = []
        var healthzAuthorization: String?
        var requests = 0
    }

    let faults: Faults
    /// Seconds an access token is accepted by `GET /v1/me`.
    let accessTokenLifetime: Int
    let state = Mutex(State())

    init(faults: Faults = [], accessTokenLifetime: Int = 900) {
        self.faults = faults
        self.accessTokenLifetime = accessTokenLifetime
    }

    var snapshot: State { state.withLock { $0 } }

    // MARK: Wire

    struct Credentials: Decodable {
        var email: String
        var password: String
        var displayName: String?
    }

    struct RefreshRequest: Decodable {
        var refreshToken: String
    }

    struct ProviderRequest: Decodable {
        var provider: String
        var idToken: String
    }

    static func json(_ status: HTTPResponse.Status, _ object: Any, contentType: String = "application/json") -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        return Response(status: status, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func problem(_ status: HTTPResponse.Status, _ code: String) -> Response {
        json(status, ["type": "about:blank", "title": code, "status": Int(status.code), "code": code, "detail": code],
             contentType: "application/problem+json")
    }

    func userJSON(_ user: User) -> [String: Any] {
        ["id": user.id, "email": user.email, "emailVerified": false, "displayName": NSNull(), "photoURL": NSNull(),
         "isAnonymous": false, "createdAt": "2025-01-01T00:00:00Z", "lastSignInAt": NSNull(), "settings": [String: Any]()]
    }

    /// Issues a session for `userID` (caller holds the lock).
    func issue(_ state: inout State, for userID: String) -> [String: Any] {
        let access = "at-" + UUID().uuidString
        let refresh = "rt-" + UUID().uuidString
        state.accessTokens[access] = (userID, .now + .seconds(accessTokenLifetime))
        state.refreshTokens[refresh] = (userID, false)
        return ["accessToken": access, "refreshToken": refresh, "tokenType": "Bearer", "expiresIn": accessTokenLifetime]
    }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        let faults = self.faults
        router.add(middleware: CountingMiddleware(gateway: self))

        router.get("/healthz") { request, _ in
            let authorization = request.headers[.authorization]
            self.state.withLock {
                $0.healthz += 1
                $0.healthzAuthorization = authorization
            }
            return "ok"
        }
        router.get("/big") { _, _ in
            // Just over the load generator's 1 MiB body limit.
            String(repeating: "x", count: (1 << 20) + 10)
        }
        router.get("/fail") { _, _ in
            FakeGateway.problem(.internalServerError, "internal")
        }
        router.post("/v1/accounts") { request, context in
            let body = try await request.decode(as: Credentials.self, context: context)
            if faults.contains(.signupOverloaded) { return FakeGateway.problem(.serviceUnavailable, "overloaded") }
            return self.state.withLock { state -> Response in
                state.signups += 1
                guard state.users[body.email] == nil else { return FakeGateway.problem(.conflict, "email_exists") }
                guard body.password.count >= 12 else { return FakeGateway.problem(.badRequest, "weak_password") }
                let user = User(id: UUID().uuidString, email: body.email, password: body.password)
                state.users[body.email] = user
                let session = self.issue(&state, for: user.id)
                return FakeGateway.json(.created, ["user": self.userJSON(user), "session": session])
            }
        }
        router.post("/v1/sessions") { request, context in
            let body = try await request.decode(as: Credentials.self, context: context)
            return self.state.withLock { state -> Response in
                state.signins += 1
                guard let user = state.users[body.email], user.password == body.password else {
                    return FakeGateway.problem(.unauthorized, "invalid_credentials")
                }
                let session = self.issue(&state, for: user.id)
                return FakeGateway.json(.ok, ["user": self.userJSON(user), "session": session])
            }
        }
        router.post("/v1/sessions/provider") { request, context in
            // The token's payload, unverified (the test checks signatures with the key): a jti
            // seen before is a replay, as at the real gateway.
            let body = try await request.decode(as: ProviderRequest.self, context: context)
            let parts = body.idToken.split(separator: ".")
            guard body.provider == "google.com", parts.count == 3, let data = Base64URL.decode(parts[1]),
                let claims = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let sub = claims["sub"] as? String, let email = claims["email"] as? String, let jti = claims["jti"] as? String
            else { return FakeGateway.problem(.unauthorized, "invalid_provider_token") }
            return self.state.withLock { state -> Response in
                guard state.providerJTIs.insert(jti).inserted else { return FakeGateway.problem(.unauthorized, "invalid_provider_token") }
                state.providerTokens.append(body.idToken)
                let user = state.providerUsers[sub] ?? User(id: UUID().uuidString, email: email, password: "")
                state.providerUsers[sub] = user
                return FakeGateway.json(.ok, ["user": self.userJSON(user), "session": self.issue(&state, for: user.id)])
            }
        }
        router.post("/v1/sessions/refresh") { request, context in
            let body = try await request.decode(as: RefreshRequest.self, context: context)
            return self.state.withLock { state -> Response in
                state.refreshes += 1
                guard let entry = state.refreshTokens[body.refreshToken] else {
                    return FakeGateway.problem(.unauthorized, "invalid_refresh_token")
                }
                guard !entry.used else {
                    state.reusedRefreshTokens += 1
                    return FakeGateway.problem(.unauthorized, "refresh_token_reused")
                }
                if faults.contains(.refreshWithoutRotation) {
                    return FakeGateway.json(.ok, ["session": ["accessToken": "at-x", "refreshToken": body.refreshToken,
                                                              "tokenType": "Bearer", "expiresIn": 900]])
                }
                state.refreshTokens[body.refreshToken]?.used = true
                return FakeGateway.json(.ok, ["session": self.issue(&state, for: entry.userID)])
            }
        }
        router.get("/v1/me") { request, _ in
            let header = request.headers[.authorization] ?? ""
            let token = header.hasPrefix("Bearer ") ? String(header.dropFirst(7)) : ""
            return self.state.withLock { state -> Response in
                state.meCalls += 1
                guard let access = state.accessTokens[token],
                      let user = state.users.values.first(where: { $0.id == access.userID })
                else { return FakeGateway.problem(.unauthorized, "invalid_token") }
                guard access.expires > .now else {
                    state.expiredAccessTokens += 1
                    return FakeGateway.problem(.unauthorized, "token_expired")
                }
                if faults.contains(.meWithoutID) { return FakeGateway.json(.ok, ["email": user.email]) }
                return FakeGateway.json(.ok, self.userJSON(user))
            }
        }
        return router
    }

    struct CountingMiddleware: RouterMiddleware {
        typealias Context = BasicRequestContext
        let gateway: FakeGateway

        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            gateway.state.withLock { $0.requests += 1 }
            return try await next(request, context)
        }
    }

    /// Starts the fake on 127.0.0.1 with an ephemeral port, runs `body` with its base URL, stops it.
    func serve<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "fake-gateway")
        logger.logLevel = .critical
        let app = Application(
            router: router(),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                continuation.yield(channel.localAddress?.port ?? 0)
                continuation.finish()
            },
            logger: logger
        )
        let server = Task { try await app.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            server.cancel()
            throw CancellationError()
        }
        do {
            let result = try await body("http://127.0.0.1:\(port)")
            server.cancel()
            _ = await server.result
            return result
        } catch {
            server.cancel()
            _ = await server.result
            throw error
        }
    }
}
