import Foundation
import GatehouseContracts
import GatehouseRPC
import Gateway
import IdentityCore
import Logging
import TokenCore

/// The gateway's view of the identity and token services, over ZeroMQ RPC.
public struct RPCGatewayBackend: GatewayBackend {
    let identity: RPCClient
    let tokens: RPCClient
    let tokenEventsEndpoint: String
    let tokenEventsCurve: CurveClientKeys?
    let logger: Logger
    /// Where each call's latency is recorded (`gatehouse_rpc_call_duration_seconds`), if anywhere.
    let metrics: GatewayMetrics?

    public init(
        identity: RPCClient, tokens: RPCClient, tokenEventsEndpoint: String, tokenEventsCurve: CurveClientKeys? = nil,
        metrics: GatewayMetrics? = nil, logger: Logger
    ) {
        self.identity = identity
        self.tokens = tokens
        self.tokenEventsEndpoint = tokenEventsEndpoint
        self.tokenEventsCurve = tokenEventsCurve
        self.metrics = metrics
        self.logger = logger
    }

    /// Every call carries a deadline: the clients' default timeout, which `GatewayRole` sets to the
    /// gateway's request timeout (`GATEHOUSE_RPC_TIMEOUT_MS`), or a shorter one given per call.
    public var enforcesDeadlines: Bool { true }

    /// One call to the identity service, timed by method and outcome.
    private func callIdentity<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration? = nil) async throws -> Res {
        try await timed("identity", method) { try await identity.call(method, request, timeout: timeout) }
    }

    /// One call to the token service, timed by method and outcome.
    private func callToken<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration? = nil) async throws -> Res {
        try await timed("token", method) { try await tokens.call(method, request, timeout: timeout) }
    }

    private func timed<Req, Res>(_ service: String, _ method: RPCMethod<Req, Res>, _ body: () async throws -> Res) async throws -> Res {
        guard let metrics else { return try await body() }
        let start = ContinuousClock.now
        do {
            let result = try await body()
            metrics.recordRPC(service: service, method: method.name, code: "ok", duration: ContinuousClock.now - start)
            return result
        } catch {
            let code = (error as? RPCError)?.code.rawValue ?? "internal"
            metrics.recordRPC(service: service, method: method.name, code: code, duration: ContinuousClock.now - start)
            throw error
        }
    }

    static func view(_ user: User) -> UserView {
        UserView(
            id: user.id, email: user.email, emailVerified: user.emailVerified,
            displayName: user.displayName.isEmpty ? nil : user.displayName, photoURL: user.photoURL.isEmpty ? nil : user.photoURL,
            isAnonymous: user.isAnonymous, createdAt: user.createdAt, lastSignInAt: user.lastSignInAt,
            settingsJSON: user.settingsJSON.isEmpty ? "{}" : user.settingsJSON)
    }

    public func signUp(email: String, password: String, displayName: String?, client: ClientInfo) async throws -> (UserView, SessionTokens) {
        let reply = try await callIdentity(IdentityAPI.signUp, SignUpRequest(email: email, password: password, displayName: displayName, client: client))
        return (Self.view(reply.user), reply.tokens)
    }

    public func signIn(email: String, password: String, client: ClientInfo) async throws -> (UserView, SessionTokens) {
        let reply = try await callIdentity(IdentityAPI.signIn, SignInRequest(email: email, password: password, client: client))
        return (Self.view(reply.user), reply.tokens)
    }

    public func refresh(refreshToken: String, client: ClientInfo) async throws -> SessionTokens {
        try await callToken(TokenAPI.refresh, RefreshRequest(refreshToken: refreshToken, client: client))
    }

    public func revokeSession(sessionID: String) async throws {
        _ = try await callToken(TokenAPI.revokeSession, RevokeSessionRequest(sessionID: sessionID, reason: "sign_out"))
    }

    public func revokeAllSessions(userID: String) async throws {
        _ = try await callToken(TokenAPI.revokeAllSessions, UserSessionsRequest(userID: userID, reason: "sign_out_everywhere"))
    }

    public func getUser(id: String) async throws -> UserView {
        Self.view(try await callIdentity(IdentityAPI.getUser, UserIDRequest(userID: id)))
    }

    public func updateProfile(id: String, displayName: String?, photoURL: String?, settingsJSON: String?) async throws -> UserView {
        Self.view(try await callIdentity(IdentityAPI.updateProfile, UpdateProfileRequest(
            userID: id, displayName: displayName, photoURL: photoURL, settingsJSON: settingsJSON, expectedVersion: nil)))
    }

    public func passwordStrength(password: String) async throws -> PasswordStrengthView {
        let reply = try await callIdentity(IdentityAPI.passwordStrength, PasswordStrengthRequest(password: password))
        return PasswordStrengthView(score: Int(reply.score), feedback: reply.reasons.map(\.message))
    }

    public func jwks() async throws -> String {
        try await callToken(TokenAPI.jwks, Empty()).json
    }

    /// Both services answer a cheap call within 500 ms (any reply, even an error, means up).
    public func ready() async -> Bool {
        async let identityUp = answers { _ = try await callIdentity(IdentityAPI.getUser, UserIDRequest(userID: "readiness-probe"), timeout: .milliseconds(500)) }
        async let tokenUp = answers { _ = try await callToken(TokenAPI.jwks, Empty(), timeout: .milliseconds(500)) }
        let (i, t) = await (identityUp, tokenUp)
        return i && t
    }

    public func hashPoolStats() async -> HashPoolStats? {
        guard let stats = try? await callIdentity(IdentityAPI.stats, Empty(), timeout: .milliseconds(250)) else { return nil }
        return HashPoolStats(
            workers: Int(stats.hashWorkers), busyWorkers: Int(stats.hashBusyWorkers), queueDepth: Int(stats.hashQueueDepth),
            queueLimit: Int(stats.hashQueueLimit), completed: Int(stats.hashCompleted), rejected: Int(stats.hashRejected))
    }

    private func answers(_ body: () async throws -> Void) async -> Bool {
        do {
            try await body()
            return true
        } catch let error as RPCError {
            return ![.unavailable, .deadlineExceeded, .cancelled].contains(error.code)
        } catch {
            return false
        }
    }

    public func revocations() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(10_000))
        let endpoint = tokenEventsEndpoint
        let curve = tokenEventsCurve
        let logger = self.logger
        let task = Task {
            do {
                let subscriber = try EventSubscriber(endpoints: [endpoint], topics: [TokenAPI.Topic.sessionRevoked], curve: curve, logger: logger)
                for await event in subscriber.events {
                    if Task.isCancelled { break }
                    if let revoked = try? event.decode(SessionRevokedEvent.self) { continuation.yield(revoked.sessionID) }
                }
                await subscriber.close()
            } catch {
                logger.error("cannot subscribe to session revocations at \(endpoint): \(error)")
                try? await Task.sleep(for: .seconds(1))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
