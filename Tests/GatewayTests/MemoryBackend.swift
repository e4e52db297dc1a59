import Foundation
import GatehouseContracts
import GatehouseSupport
import JWTKit
import Synchronization

@testable import Gateway

/// An in-memory `GatewayBackend` that behaves like the identity and token services: users with
/// passwords, sessions with rotating refresh tokens, real ES256 access tokens and a JWKS.
///
/// Test hooks: a password `raise:<code>` makes `passwordStrength` throw that code; `sleep` makes it
/// hang; `addSigningKey`/`useKey` rotate keys; `emitRevocation` publishes on the feed.
final class MemoryBackend: GatewayBackend {
    struct User {
        var view: UserView
        var password: String
        var disabled = false
    }
    struct Session {
        var userID: String
        var refreshToken: String
        var previousRefreshToken: String?
        var revoked = false
    }
    struct State {
        var users: [String: User] = [:]
        var idByEmail: [String: String] = [:]
        var sessions: [String: Session] = [:]
        var publicJWKs: [[String: String]] = []
        var currentKID = ""
        var jwksCalls = 0
        var ready = true
        var feeds: [AsyncStream<String>.Continuation] = []
        var revokedCalls: [String] = []
        var nextID = 1
        var lastClient: ClientInfo?
        /// The task's trace during the last sign-in (what the RPC clients would send).
        var lastTrace: TraceParent?
        var jwksFails = false
        /// What `hashPoolStats()` answers (nil: the identity service does not answer).
        var hashPool: HashPoolStats?
        /// While true, sign-ins wait (counted in `waitingSignIns`) before answering.
        var holdSignIns = false
        var waitingSignIns = 0
    }

    let state = Mutex(State())
    let keys = JWTKeyCollection()
    let issuer: String
    let audience: String
    let now: @Sendable () -> Date

    init(issuer: String = "https://auth.test", audience: String = "gatehouse-test", now: @escaping @Sendable () -> Date) async {
        self.issuer = issuer
        self.audience = audience
        self.now = now
        await addSigningKey(kid: "key-1", publish: true)
    }

    // MARK: Keys

    /// Adds an ES256 key; `publish` puts it in the JWKS. New tokens are signed with it.
    func addSigningKey(kid: String, publish: Bool) async {
        let key = ES256PrivateKey()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: kid))
        let params = key.publicKey.parameters!
        state.withLock { s in
            s.currentKID = kid
            if publish {
                s.publicJWKs.append(["kty": "EC", "crv": "P-256", "x": params.x, "y": params.y, "kid": kid, "alg": "ES256", "use": "sig"])
            }
        }
    }

    var jwksCalls: Int { state.withLock { $0.jwksCalls } }

    func mint(
        sub: String, sid: String, issuedAt: Date? = nil, ttl: TimeInterval = 900, issuer: String? = nil, audience: String? = nil,
        kid: String? = nil
    ) async throws -> String {
        let iat = issuedAt ?? now()
        let claims = AccessTokenClaims(
            sub: sub, sid: sid, exp: iat.addingTimeInterval(ttl), iat: iat, iss: issuer ?? self.issuer, aud: [audience ?? self.audience],
            jti: UUID().uuidString, email: state.withLock { $0.users[sub]?.view.email }, emailVerified: false, isAnonymous: false,
            amr: ["pwd"], authTime: iat)
        let kid = kid ?? state.withLock { $0.currentKID }
        return try await keys.sign(claims, kid: JWKIdentifier(string: kid))
    }

    // MARK: GatewayBackend

    func signUp(email: String, password: String, displayName: String?, client: ClientInfo) async throws -> (UserView, SessionTokens) {
        guard email.contains("@") else { throw RPCError("invalid_email", "the email address is not valid") }
        guard password.count >= 8 else {
            throw RPCError("weak_password", "the password is too weak", details: ["reasons": "too_short,common_password"])
        }
        let user: UserView = try state.withLock { s in
            let key = email.lowercased()
            guard s.idByEmail[key] == nil else { throw RPCError("email_exists", "an account with this email exists") }
            let id = "user-\(s.nextID)"
            s.nextID += 1
            let view = UserView(
                id: id, email: email, displayName: displayName, createdAt: Date(timeIntervalSince1970: 1_700_000_000),
                lastSignInAt: Date(timeIntervalSince1970: 1_700_000_000), settingsJSON: #"{"theme":"dark","n":1.50}"#)
            s.users[id] = User(view: view, password: password)
            s.idByEmail[key] = id
            return view
        }
        return (user, try await openSession(userID: user.id))
    }

    func signIn(email: String, password: String, client: ClientInfo) async throws -> (UserView, SessionTokens) {
        if state.withLock({ $0.holdSignIns }) {
            state.withLock { $0.waitingSignIns += 1 }
            while state.withLock({ $0.holdSignIns }) { try await Task.sleep(for: .milliseconds(2)) }
            state.withLock { $0.waitingSignIns -= 1 }
        }
        let trace = TraceContext.current
        let user: UserView = try state.withLock { s in
            s.lastClient = client
            s.lastTrace = trace
            guard let id = s.idByEmail[email.lowercased()], let user = s.users[id] else {
                throw RPCError("invalid_credentials", "no user with this email")  // the gateway must hide this text
            }
            guard user.password == password else { throw RPCError("invalid_credentials", "wrong password") }
            guard !user.disabled else { throw RPCError("user_disabled", "the account is disabled") }
            return user.view
        }
        return (user, try await openSession(userID: user.id))
    }

    private func openSession(userID: String) async throws -> SessionTokens {
        let sid = UUID().uuidString
        let refresh = UUID().uuidString
        state.withLock { $0.sessions[sid] = Session(userID: userID, refreshToken: refresh) }
        let access = try await mint(sub: userID, sid: sid)
        return SessionTokens(accessToken: access, refreshToken: refresh, expiresIn: 900, sessionID: sid)
    }

    func refresh(refreshToken: String, client: ClientInfo) async throws -> SessionTokens {
        let (sid, userID, newRefresh): (String, String, String) = try state.withLock { s in
            if let (sid, _) = s.sessions.first(where: { $0.value.previousRefreshToken == refreshToken }) {
                s.sessions[sid]?.revoked = true
                throw RPCError("refresh_token_reused", "the refresh token was already used")
            }
            guard let (sid, session) = s.sessions.first(where: { $0.value.refreshToken == refreshToken }) else {
                throw RPCError("invalid_refresh_token", "unknown refresh token")
            }
            guard !session.revoked else { throw RPCError("session_revoked", "the session was revoked") }
            let newRefresh = UUID().uuidString
            s.sessions[sid]?.previousRefreshToken = refreshToken
            s.sessions[sid]?.refreshToken = newRefresh
            return (sid, session.userID, newRefresh)
        }
        let access = try await mint(sub: userID, sid: sid)
        return SessionTokens(accessToken: access, refreshToken: newRefresh, expiresIn: 900, sessionID: sid)
    }

    func revokeSession(sessionID: String) async throws {
        state.withLock { s in
            s.sessions[sessionID]?.revoked = true
            s.revokedCalls.append(sessionID)
        }
    }

    func revokeAllSessions(userID: String) async throws {
        state.withLock { s in
            for (sid, session) in s.sessions where session.userID == userID {
                s.sessions[sid]?.revoked = true
                s.revokedCalls.append(sid)
            }
        }
    }

    func getUser(id: String) async throws -> UserView {
        try state.withLock { s in
            guard let user = s.users[id] else { throw RPCError("user_not_found", "no such user") }
            return user.view
        }
    }

    func updateProfile(id: String, displayName: String?, photoURL: String?, settingsJSON: String?) async throws -> UserView {
        try state.withLock { s in
            guard var user = s.users[id] else { throw RPCError("user_not_found", "no such user") }
            if let displayName { user.view.displayName = displayName }
            if let photoURL { user.view.photoURL = photoURL }
            if let settingsJSON { user.view.settingsJSON = settingsJSON }
            s.users[id] = user
            return user.view
        }
    }

    func passwordStrength(password: String) async throws -> PasswordStrengthView {
        if password.hasPrefix("raise:") {
            let code = String(password.dropFirst(6))
            throw RPCError(ErrorCode(rawValue: code), "backend says \(code)", details: ["reasons": "too_short"])
        }
        if password == "sleep" { try await Task.sleep(for: .seconds(10)) }
        return PasswordStrengthView(score: min(4, password.count / 4), feedback: password.count < 12 ? ["Use a longer password."] : [])
    }

    func jwks() async throws -> String {
        let (keys, fails) = state.withLock { s in
            s.jwksCalls += 1
            return (s.publicJWKs, s.jwksFails)
        }
        if fails { throw RPCError(.unavailable, "token service down") }
        let data = try JSONSerialization.data(withJSONObject: ["keys": keys], options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    func ready() async -> Bool { state.withLock { $0.ready } }

    func hashPoolStats() async -> HashPoolStats? { state.withLock { $0.hashPool } }

    func revocations() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        state.withLock { $0.feeds.append(continuation) }
        return stream
    }

    /// Publishes a revoked session id on every open feed (as the token service would).
    func emitRevocation(_ sid: String) {
        for feed in state.withLock({ $0.feeds }) { feed.yield(sid) }
    }

    func setJWKSFails(_ fails: Bool) { state.withLock { $0.jwksFails = fails } }
    func setReady(_ ready: Bool) { state.withLock { $0.ready = ready } }
    func disable(_ userID: String) { state.withLock { $0.users[userID]?.disabled = true } }
}

/// A clock tests can move.
final class TestClock: Sendable {
    private let value = Mutex(Date())
    var now: Date { value.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var gatewayClock: GatewayClock { GatewayClock { [self] in self.now } }
}
