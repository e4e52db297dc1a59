import Foundation
import IdentityPorts
@testable import SQLiteStores
import GatehouseContracts
import IdentityCore
import IdentityService
import GatehouseTestSupport
import GatehouseSupport
import JWTKit
import ProtoCodec
import RPCRouting
import Synchronization
import TokenService

@testable import Gateway

/// The real identity and token services in this process: the identity handlers on an in-memory
/// user store, the token service on a SQLite file in a temporary folder, both on the test clock,
/// reached through `LocalCaller`s (every message is encoded and decoded as on the wire).
///
/// A test changes what one method does with a hook (`fail`, `override`, `before`), and reads
/// what the gateway sent with `calls(to:)` and `lastRequest(_:)`. A `TestSigner`'s published
/// keys are served in `token.jwks` next to the token service's own, so tests can mint tokens
/// the real service never would (wrong issuer, past expiry, unpublished key).
final class InProcessServices: Sendable {
    typealias Hook = @Sendable (any Sendable) async throws -> (any Sendable)?

    let identityHandlers: IdentityHandlers
    let token: TokenService
    let signer: TestSigner
    let directory: URL
    private let hooks = Mutex<[String: Hook]>([:])
    private let counts = Mutex<[String: Int]>([:])
    private let requests = Mutex<[String: any Sendable]>([:])
    private let traces = Mutex<[String: TraceParent]>([:])
    private let feeds: Feeds

    /// The identity handlers run on a real `SQLiteUserStore` in the folder (`identity.sqlite`).
    /// `emailVerification` sets the identity handlers' `GATEHOUSE_EMAIL_VERIFICATION` mode.
    init(
        clock: ManualClock, issuer: String, audience: String,
        emailVerification: EmailFlowSettings.Verification = .off
    ) async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        signer = await TestSigner(issuer: issuer, audience: audience, now: { clock.now })
        let feeds = Feeds()
        self.feeds = feeds
        let identityBox = Box()
        var configuration = TokenConfiguration(issuer: issuer, audience: audience)
        configuration.accessTokenTTL = 900
        token = try await TokenService.start(
            configuration: configuration, store: SQLiteTokenStore(path: directory.appendingPathComponent("token.sqlite").path),
            identity: DeferredCaller(box: identityBox),
            publish: { topic, payload in
                switch topic {
                case TokenAPI.Topic.sessionRevoked:
                    if let event = try? ProtobufDecoder().decode(SessionRevokedEvent.self, from: payload) { feeds.publish(.revoked(event)) }
                case TokenAPI.Topic.heartbeat:
                    if let beat = try? ProtobufDecoder().decode(RevocationHeartbeat.self, from: payload) { feeds.publish(.heartbeat(beat)) }
                default:
                    break
                }
            },
            clock: clock.wallClock)
        let pool = HashPool(workers: 2, queueLimit: 64)
        let users = try await SQLiteUserStore.open(path: directory.appendingPathComponent("identity.sqlite").path)
        try await users.migrate()
        var handlers = IdentityHandlers(
            store: users, hasher: PasswordHasher(parameters: .testing, pool: pool), policy: PasswordPolicy(),
            tokens: LocalCaller(router: token.router()), clock: clock.wallClock)
        handlers.emailFlows.verification = emailVerification
        identityHandlers = handlers
        identityBox.caller.withLock { $0 = LocalCaller(router: identityHandlers.router()) }
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// What the gateway is given: both services behind the hooks, and the revocation feed.
    var gatewayServices: GatewayServices {
        let signer = self.signer
        let identity = HookedCaller(base: LocalCaller(router: identityHandlers.router()), services: self)
        let tokens = HookedCaller(base: LocalCaller(router: token.router()), services: self) { method, reply in
            // The signer's published keys are served next to the token service's own.
            guard method == TokenAPI.jwks.name, let document = reply as? JWKSDocument else { return reply }
            return JWKSDocument(json: signer.merged(into: document.json))
        }
        return GatewayServices(
            identity: identity, tokens: tokens, revocations: { [self] in revocationStream() }, enforcesDeadlines: false)
    }

    // MARK: Hooks

    /// `method` throws `error` until the hook is cleared.
    func fail<Req, Res>(_ method: RPCMethod<Req, Res>, with error: RPCError?) {
        let hook: Hook? = error.map { error in { @Sendable _ in throw error } }
        hooks.withLock { $0[method.name] = hook }
    }

    /// `method` answers with `answer` instead of the service (nil: the service answers).
    func override<Req, Res>(_ method: RPCMethod<Req, Res>, _ answer: (@Sendable (Req) async throws -> Res)?) {
        let hook: Hook? = answer.map { answer in { @Sendable request in try await answer(request as! Req) } }
        hooks.withLock { $0[method.name] = hook }
    }

    /// `body` runs before every call of `method`; the service answers afterwards.
    func before<Req, Res>(_ method: RPCMethod<Req, Res>, _ body: @escaping @Sendable () async throws -> Void) {
        let hook: Hook = { @Sendable _ in
            try await body()
            return nil
        }
        hooks.withLock { $0[method.name] = hook }
    }

    /// How many times the gateway called `method`.
    func calls<Req, Res>(to method: RPCMethod<Req, Res>) -> Int { counts.withLock { $0[method.name] ?? 0 } }

    /// The last request the gateway sent to `method`.
    func lastRequest<Req, Res>(_ method: RPCMethod<Req, Res>) -> Req? { requests.withLock { $0[method.name] as? Req } }

    /// The task's trace when the gateway last called `method` (what the RPC clients would send).
    func lastTrace<Req, Res>(_ method: RPCMethod<Req, Res>) -> TraceParent? { traces.withLock { $0[method.name] } }

    /// Publishes a revocation of `sid` through the token service's feed (next seq of its epoch),
    /// without revoking anything in its database.
    func emitRevocation(_ sid: String) {
        token.revocationFeed.announce(SessionRevokedEvent(sessionID: sid, userID: "", reason: "test", revokedAt: Date()))
    }

    /// Publishes the token service's heartbeat (tests beat it by hand).
    func heartbeat() { token.revocationFeed.heartbeat() }

    /// Sends `notice` on every open feed as it is (a forged epoch or seq).
    func emit(_ notice: RevocationNotice) { feeds.yield(notice) }

    /// While true, the token service's events are lost on the way (heartbeats and `emit` still pass).
    func dropEvents(_ drop: Bool) { feeds.dropping.withLock { $0 = drop } }

    /// How many times a gateway has subscribed to the feed.
    var subscriptions: Int { feeds.continuations.withLock { $0.count } }

    fileprivate func record(_ name: String, _ request: any Sendable) -> Hook? {
        counts.withLock { $0[name, default: 0] += 1 }
        requests.withLock { $0[name] = request }
        if let trace = TraceContext.current { traces.withLock { $0[name] = trace } }
        return hooks.withLock { $0[name] }
    }

    private func revocationStream() -> AsyncStream<RevocationNotice> {
        let (stream, continuation) = AsyncStream.makeStream(of: RevocationNotice.self)
        feeds.continuations.withLock { $0.append(continuation) }
        return stream
    }
}

/// A caller that counts and records each call, then runs the method's hook, if any, before or
/// instead of the real service.
private struct HookedCaller: RPCCaller {
    let base: LocalCaller
    let services: InProcessServices
    var transform: @Sendable (String, any Sendable) -> any Sendable = { $1 }

    init(base: LocalCaller, services: InProcessServices, transform: @escaping @Sendable (String, any Sendable) -> any Sendable = { $1 }) {
        self.base = base
        self.services = services
        self.transform = transform
    }

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res {
        try await hooked(method, request) { try await base.call(method, request, timeout: timeout) }
    }

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res {
        try await hooked(method, request) { try await base.call(method, request, deadline: deadline) }
    }

    private func hooked<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, _ service: () async throws -> Res) async throws -> Res {
        if let hook = services.record(method.name, request), let answer = try await hook(request) {
            return answer as! Res
        }
        return transform(method.name, try await service()) as! Res
    }
}

/// Reaches a caller made after this one (the token service needs the identity service's caller
/// at start, and the identity handlers need the token service's).
private struct DeferredCaller: RPCCaller {
    let box: Box

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res {
        try await caller().call(method, request, timeout: timeout)
    }

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res {
        try await caller().call(method, request, deadline: deadline)
    }

    private func caller() throws -> any RPCCaller {
        guard let caller = box.caller.withLock({ $0 }) else { throw RPCError(.unavailable, "the identity service is not started yet") }
        return caller
    }
}

/// The open revocation feeds.
private final class Feeds: Sendable {
    let continuations = Mutex<[AsyncStream<RevocationNotice>.Continuation]>([])
    let dropping = Mutex(false)

    /// What the token service publishes: events are lost while `dropping`.
    func publish(_ notice: RevocationNotice) {
        if case .revoked = notice, dropping.withLock({ $0 }) { return }
        yield(notice)
    }

    func yield(_ notice: RevocationNotice) {
        for feed in continuations.withLock({ $0 }) { feed.yield(notice) }
    }
}

/// A caller set once both services exist.
private final class Box: Sendable {
    let caller = Mutex<(any RPCCaller)?>(nil)
}

/// Mints access tokens with keys of its own, for tokens the token service would not mint.
final class TestSigner: Sendable {
    let keys = JWTKeyCollection()
    let issuer: String
    let audience: String
    let now: @Sendable () -> Date
    private let state = Mutex<(published: [[String: String]], current: String)>(([], ""))

    init(issuer: String, audience: String, now: @escaping @Sendable () -> Date) async {
        self.issuer = issuer
        self.audience = audience
        self.now = now
    }

    /// Adds an ES256 key; `publish` puts it in the JWKS. New tokens are signed with it.
    func addSigningKey(kid: String, publish: Bool) async {
        let key = ES256PrivateKey()
        await keys.add(ecdsa: key, kid: JWKIdentifier(string: kid))
        let params = key.publicKey.parameters!
        state.withLock { s in
            s.current = kid
            if publish {
                s.published.append(["kty": "EC", "crv": "P-256", "x": params.x, "y": params.y, "kid": kid, "alg": "ES256", "use": "sig"])
            }
        }
    }

    /// A signed token with the given claims (defaults: this signer's issuer and audience, now, 15 minutes).
    func mint(
        sub: String, sid: String, issuedAt: Date? = nil, ttl: TimeInterval = 900, issuer: String? = nil, audience: String? = nil,
        kid: String? = nil
    ) async throws -> String {
        let iat = issuedAt ?? now()
        let claims = AccessTokenClaims(
            sub: sub, sid: sid, exp: iat.addingTimeInterval(ttl), iat: iat, iss: issuer ?? self.issuer, aud: [audience ?? self.audience],
            jti: UUID().uuidString, emailVerified: false, isAnonymous: false, amr: ["pwd"], authTime: iat)
        let kid = kid ?? state.withLock { $0.current }
        return try await keys.sign(claims, kid: JWKIdentifier(string: kid))
    }

    /// `json` (a JWKS document) with this signer's published keys appended.
    func merged(into json: String) -> String {
        let published = state.withLock { $0.published }
        guard !published.isEmpty,
            var document = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any],
            let keys = document["keys"] as? [Any]
        else { return json }
        document["keys"] = keys + published
        guard let data = try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys]) else { return json }
        return String(decoding: data, as: UTF8.self)
    }
}
