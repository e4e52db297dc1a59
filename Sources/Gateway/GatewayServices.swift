public import GatehouseContracts
public import RPCRouting

/// The services behind the gateway. The gateway holds no user data: each request becomes one
/// typed call of the contract (`IdentityAPI`, `TokenAPI`) on one of these callers. In
/// production they are ZeroMQ clients (`GatehouseApp`); tests serve the real handlers in
/// process through `LocalCaller`.
///
/// Every failure arrives as an `RPCError` with a stable code; the error table
/// (`GatewayError.init(_:)`) gives its HTTP form.
public struct GatewayServices: Sendable {
    /// Reaches the identity service.
    public var identity: any RPCCaller
    /// Reaches the token service.
    public var tokens: any RPCCaller
    /// A new subscription to the token service's revocation feed (`session.revoked` events and
    /// `token.heartbeat`s). Events can be lost: the gateway detects a gap or a restart by their
    /// epoch and seq and reloads `token.listRevocations`; it resubscribes when a stream ends.
    public var revocations: @Sendable () -> AsyncStream<RevocationNotice>
    /// True when every call already fails with `deadline_exceeded` or `unavailable` within the
    /// gateway's request timeout (the ZeroMQ clients: each call carries that deadline). Otherwise
    /// the gateway races each call against a timer of its own, which costs two child tasks and a
    /// timer per request.
    public var enforcesDeadlines: Bool
    /// A new subscription to the identity service's change feed (`user.changed` events and
    /// `identity.heartbeat`s), for `GET /v1/me/events`. Events can be lost: the gateway detects a
    /// gap by their seq and lists the missing ones with `identity.listChanges`; it resubscribes
    /// when a stream ends. By default a feed that never says anything.
    public var userChanges: @Sendable () -> AsyncStream<ChangeNotice>

    /// Services reached through `identity` and `tokens`.
    public init(
        identity: any RPCCaller, tokens: any RPCCaller, revocations: @escaping @Sendable () -> AsyncStream<RevocationNotice>,
        enforcesDeadlines: Bool,
        userChanges: @escaping @Sendable () -> AsyncStream<ChangeNotice> = { AsyncStream { _ in } }
    ) {
        self.identity = identity
        self.tokens = tokens
        self.revocations = revocations
        self.enforcesDeadlines = enforcesDeadlines
        self.userChanges = userChanges
    }

    /// Both services answer a cheap call within 500 ms (any reply, even an error, means up).
    func ready() async -> Bool {
        async let identityUp = Self.answers {
            _ = try await identity.call(IdentityAPI.getUser, UserIDRequest(userID: "readiness-probe"), timeout: .milliseconds(500))
        }
        async let tokenUp = Self.answers { _ = try await tokens.call(TokenAPI.jwks, Empty(), timeout: .milliseconds(500)) }
        let (i, t) = await (identityUp, tokenUp)
        return i && t
    }

    /// The identity service's hashing pool, for `/metrics`; nil when it does not answer in 250 ms.
    func hashPoolStats() async -> IdentityStats? {
        try? await identity.call(IdentityAPI.stats, Empty(), timeout: .milliseconds(250))
    }

    private static func answers(_ body: () async throws -> Void) async -> Bool {
        do {
            try await body()
            return true
        } catch let error as RPCError {
            return ![.unavailable, .deadlineExceeded, .cancelled].contains(error.code)
        } catch {
            return false
        }
    }
}

/// One message of the token service's revocation feed.
public enum RevocationNotice: Sendable, Hashable {
    /// A `session.revoked` event.
    case revoked(SessionRevokedEvent)
    /// A `token.heartbeat`: the feed's position.
    case heartbeat(RevocationHeartbeat)
}

/// A caller that records each call's latency by service, method and outcome
/// (`gatehouse_rpc_call_duration_seconds`).
public struct TimedCaller: RPCCaller {
    let base: any RPCCaller
    let service: String
    let metrics: GatewayMetrics

    /// Times every call of `base`, labelled `service` (`identity` or `token`).
    public init(_ base: any RPCCaller, service: String, metrics: GatewayMetrics) {
        self.base = base
        self.service = service
        self.metrics = metrics
    }

    /// Calls `base`, recording the latency with `ok` or the error's stable code.
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res {
        try await timed(method) { try await base.call(method, request, timeout: timeout) }
    }

    /// Calls `base` within `deadline`, recording the latency like `call(_:_:timeout:)`.
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res {
        try await timed(method) { try await base.call(method, request, deadline: deadline) }
    }

    private func timed<Req, Res>(_ method: RPCMethod<Req, Res>, _ body: () async throws -> Res) async throws -> Res {
        let start = ContinuousClock.now
        do {
            let result = try await body()
            metrics.recordRPC(service: service, method: method.name, code: "ok", duration: ContinuousClock.now - start)
            return result
        } catch {
            let code = (error as? RPCError)?.code.rawValue ?? ErrorCode.internal.rawValue
            metrics.recordRPC(service: service, method: method.name, code: code, duration: ContinuousClock.now - start)
            throw error
        }
    }
}
