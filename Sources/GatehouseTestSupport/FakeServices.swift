import GatehouseContracts
import RPCRouting
import Synchronization

/// A stand-in token service for identity tests: answers `token.issueSession` with the access
/// token `at-<userID>`, the refresh token `rt` and the session `sid-1`, and remembers each request;
/// answers `token.revokeAllSessions` with nothing revoked, remembering the user ids, and
/// `token.revokeSession` with the session revoked, remembering the request.
public final class FakeTokenService: Sendable {
    private let stored = Mutex<[IssueSessionRequest]>([])
    private let storedRevocations = Mutex<[UserSessionsRequest]>([])
    private let storedSessionRevocations = Mutex<[RevokeSessionRequest]>([])
    private let storedDeadlines = Mutex<[ContinuousClock.Instant]>([])
    private let issueHook = Mutex<(@Sendable (IssueSessionRequest) async -> Void)?>(nil)

    /// A fake that has seen no request yet.
    public init() {}

    /// Runs `hook` inside each later `issueSession`, before it answers (nil: none): a test makes
    /// something happen while a sign-in waits for its session.
    public func onIssue(_ hook: (@Sendable (IssueSessionRequest) async -> Void)?) { issueHook.withLock { $0 = hook } }

    /// The `issueSession` requests so far, in order.
    public var requests: [IssueSessionRequest] { stored.withLock { $0 } }

    /// The `revokeAllSessions` requests so far, in order.
    public var revocations: [UserSessionsRequest] { storedRevocations.withLock { $0 } }

    /// The `revokeSession` requests so far, in order.
    public var sessionRevocations: [RevokeSessionRequest] { storedSessionRevocations.withLock { $0 } }

    /// The deadline each request was served with, in order.
    public var deadlines: [ContinuousClock.Instant] { storedDeadlines.withLock { $0 } }

    /// A router serving `token.issueSession` (for an `RPCServer` or a `LocalCaller`).
    public var router: RPCRouter {
        var router = RPCRouter()
        router.register(ServiceContracts.issueSession) { request, context in
            self.stored.withLock { $0.append(request) }
            self.storedDeadlines.withLock { $0.append(context.deadline) }
            if let hook = self.issueHook.withLock({ $0 }) { await hook(request) }
            return SessionTokens(accessToken: "at-\(request.userID)", refreshToken: "rt", expiresIn: 900, sessionID: "sid-1")
        }
        router.register(TokenAPI.revokeAllSessions) { request, _ in
            self.storedRevocations.withLock { $0.append(request) }
            return RevokedCount(count: 0)
        }
        router.register(TokenAPI.revokeSession) { request, _ in
            self.storedSessionRevocations.withLock { $0.append(request) }
            return RevokedCount(count: 1, sessionIDs: [request.sessionID])
        }
        return router
    }

    /// The fake called in process.
    public var caller: LocalCaller { LocalCaller(router: router) }
}

/// A stand-in identity service for token tests: answers `identity.claimsForSession` from
/// `claims`, with `unknownUser` for a user it does not hold, and counts the calls.
public final class FakeIdentityService: Sendable {
    /// The claims of each user id; tests set them.
    public let claims = Mutex<[String: UserClaims]>([:])
    /// How many `claimsForSession` calls arrived.
    public let calls = Atomic<Int>(0)
    /// The deadline each call was served with, in order.
    public let deadlines = Mutex<[ContinuousClock.Instant]>([])
    /// The answer for a user id missing from `claims`.
    public let unknownUser: UserClaims

    /// A fake holding no user; unknown users get `unknownUser` (by default: they do not exist).
    public init(unknownUser: UserClaims = UserClaims(exists: false)) {
        self.unknownUser = unknownUser
    }

    /// Sets the claims of `userID`.
    public func set(_ userID: String, _ userClaims: UserClaims) {
        claims.withLock { $0[userID] = userClaims }
    }

    /// A router serving `identity.claimsForSession` (for an `RPCServer` or a `LocalCaller`).
    public var router: RPCRouter {
        var router = RPCRouter()
        router.register(ServiceContracts.claimsForSession) { request, context in
            self.calls.add(1, ordering: .relaxed)
            self.deadlines.withLock { $0.append(context.deadline) }
            return self.claims.withLock { $0[request.userID] } ?? self.unknownUser
        }
        return router
    }

    /// The fake called in process.
    public var caller: LocalCaller { LocalCaller(router: router) }
}
