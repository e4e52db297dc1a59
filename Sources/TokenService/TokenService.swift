import Crypto
import Foundation
import Synchronization
import GatehouseContracts
import Logging
import ProtoCodec
import TokenCore
import TokenPorts
import RPCRouting
import GatehouseSupport

/// Token-service settings.
public struct TokenConfiguration: Sendable {
    /// The `iss` of access tokens.
    public var issuer: String
    /// The `aud` of access tokens.
    public var audience: String
    /// Access-token lifetime in seconds (15 minutes).
    public var accessTokenTTL: TimeInterval = 900
    /// Absolute session lifetime in seconds (60 days).
    public var sessionTTL: TimeInterval = 60 * 86_400
    /// A session unused this long (seconds, 30 days) can no longer refresh.
    public var idleTimeout: TimeInterval = 30 * 86_400
    /// A rotated refresh token presented again within this window returns the same successor.
    public var refreshGrace: TimeInterval = 10
    /// How long ended sessions (revoked, expired, idle) are kept before `sweep()` deletes them;
    /// also how long a superseded refresh token is at least kept for reuse detection.
    public var sessionRetention: TimeInterval = 7 * 86_400
    /// Seconds an audit event is kept (`GATEHOUSE_AUDIT_RETENTION`; 90 days); the sweep prunes older ones.
    public var auditRetention: TimeInterval = 7_776_000
    /// The algorithm of new signing keys.
    public var algorithm: SigningAlgorithm = .es256
    /// Encrypts private keys (and the refresh secret) at rest when set (AES-256-GCM).
    public var encryptionKey: SymmetricKey?
    /// Clock skew tolerated when verifying `iat`, `nbf` and `exp` (seconds).
    public var leeway: TimeInterval = 10
    /// How long a new signing key is published before it signs (`rotateKeys`): 0 with one
    /// instance; with several on one database, longer than `keySyncInterval`, so every instance
    /// publishes the key before any signs with it.
    public var keyActivationDelay: TimeInterval = 0
    /// How often each instance reloads the keys from the store (`KeySync`); nil: only at start and
    /// after its own rotation (one instance).
    public var keySyncInterval: TimeInterval?
    /// Seconds after which the newest signing key is replaced by a new one without any command
    /// (`GATEHOUSE_SIGNING_KEY_ROTATION_DAYS`, `KeyRotationSchedule`); nil: only when asked.
    public var keyRotationInterval: TimeInterval?

    /// Settings with these two and the defaults for the rest.
    public init(issuer: String, audience: String) {
        self.issuer = issuer
        self.audience = audience
    }
}

/// The token service: the only holder of private signing keys.
public final class TokenService: Sendable {
    /// The settings it was started with.
    public let configuration: TokenConfiguration
    /// Keys, sessions and refresh tokens: whichever store the composition root gave.
    public let store: any TokenStorage
    /// The signing keys in memory: the active one and those still published.
    public let keys: KeyRing
    /// Verifies access tokens against `keys`.
    public let verifier: TokenVerifier
    let identity: any RPCCaller
    /// Numbers and publishes the `session.revoked` events, and beats `token.heartbeat`.
    public let revocationFeed: RevocationFeed
    /// Token expiry, refresh grace, session lifetimes and sweeps read the time here.
    public let clock: WallClock
    let random: @Sendable (Int) -> [UInt8]
    let successorKey: SymmetricKey
    let logger: Logger
    /// When the next published key starts signing, as of the last load (nil: none waiting).
    let pendingActivation = Mutex<Date?>(nil)
    /// When the newest stored key was made, as of the last load.
    let newestKeyCreatedAt = Mutex<Date?>(nil)

    /// Migrates `store`, loads the signing keys (generating the first one) and the refresh-token
    /// secret.
    public static func start(
        configuration: TokenConfiguration, store: any TokenStorage, identity: any RPCCaller,
        publish: @escaping @Sendable (String, [UInt8]) -> Void = { _, _ in },
        clock: WallClock = .system,
        random: @escaping @Sendable (Int) -> [UInt8] = TokenService.secureRandom,
        logger: Logger = Logger(label: "gatehouse.token")
    ) async throws -> TokenService {
        try await store.migrate()
        let secret = try await openSecrets(store, configuration: configuration, random: random, logger: logger)
        let keys = KeyRing()
        let feed: RevocationFeed
        if let log = store.sharedRevocationLog {
            let (seq, _) = try await log.revocationSnapshot(since: clock.now)
            feed = RevocationFeed(shared: log, epoch: try await log.revocationEpoch(), position: seq, publish: publish, logger: logger)
        } else {
            feed = RevocationFeed(random: random, publish: publish)
        }
        let service = TokenService(
            configuration: configuration, store: store, keys: keys,
            verifier: TokenVerifier(keys: keys, issuer: configuration.issuer, audience: configuration.audience, leeway: configuration.leeway),
            identity: identity, revocationFeed: feed, clock: clock, random: random,
            successorKey: SymmetricKey(data: secret), logger: logger)
        try await service.loadKeys()
        return service
    }

    init(
        configuration: TokenConfiguration, store: any TokenStorage, keys: KeyRing, verifier: TokenVerifier, identity: any RPCCaller,
        revocationFeed: RevocationFeed, clock: WallClock,
        random: @escaping @Sendable (Int) -> [UInt8], successorKey: SymmetricKey, logger: Logger
    ) {
        self.configuration = configuration
        self.store = store
        self.keys = keys
        self.verifier = verifier
        self.identity = identity
        self.revocationFeed = revocationFeed
        self.clock = clock
        self.random = random
        self.successorKey = successorKey
        self.logger = logger
    }

    // MARK: Tokens

    /// `count` bytes from BoringSSL's CSPRNG (seeded from the OS; no system call per byte, unlike
    /// `UInt8.random`, which asks the kernel for every byte).
    public static func secureRandom(_ count: Int) -> [UInt8] {
        SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)).withUnsafeBytes { Array($0) }
    }

    func newID(_ bytes: Int) -> String { Base64URL.encode(random(bytes)) }

    static func hash(_ token: String) -> Data { Data(SHA256.hash(data: Data(token.utf8))) }

    /// The successor of a refresh token is derived, not stored: HMAC(secret, token). A retry
    /// inside the grace window gets the same successor without its plaintext ever being kept.
    func successor(of token: String) -> String {
        Base64URL.encode(Data(HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: successorKey)))
    }

    /// A refresh token is 32 random bytes in unpadded base64url: 43 characters.
    static func isWellFormedRefreshToken(_ token: String) -> Bool {
        token.utf8.count == 43 && token.utf8.allSatisfy { $0.isBase64URL }
    }

    func mintAccessToken(userID: String, sessionID: String, authTime: Date, amr: [String], claims: UserClaims) throws -> (String, Int64) {
        let issued = clock.now
        let ttl = Int64(configuration.accessTokenTTL)
        let custom: [String: JSONValue]
        do { custom = try AccessClaims.parseCustomClaims(claims.customClaimsJSON) } catch {
            logger.warning("ignoring invalid custom claims of \(userID): \(error)")
            custom = [:]
        }
        let iat = Int64(issued.timeIntervalSince1970)
        let access = AccessClaims(
            iss: configuration.issuer, aud: configuration.audience, sub: userID, iat: iat, exp: iat + ttl, jti: newID(16),
            sid: sessionID, authTime: Int64(authTime.timeIntervalSince1970), amr: amr,
            email: claims.email.isEmpty ? nil : claims.email, emailVerified: claims.emailVerified, isAnonymous: claims.isAnonymous,
            custom: custom)
        return (try keys.sign(access), ttl)
    }

    /// `token.issueSession`.
    public func issueSession(_ request: IssueSessionRequest) async throws -> SessionTokens {
        guard !request.userID.isEmpty, request.userID.utf8.count <= 128 else { throw TokenError.invalidArgument("userID must be 1 to 128 bytes") }
        guard request.amr.count <= 8, request.amr.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 32 && !$0.contains(" ") }) else {
            throw TokenError.invalidArgument("amr must be at most 8 short values without spaces")
        }
        if !request.claims.customClaimsJSON.isEmpty {
            do { _ = try AccessClaims.parseCustomClaims(request.claims.customClaimsJSON) } catch {
                throw TokenError.invalidArgument("custom claims are not acceptable: \(error)")
            }
        }
        let at = clock.now
        let sessionID = newID(16)
        let refresh = newID(32)
        // NUL never reaches a store (PostgreSQL's text refuses it; nothing legitimate holds one).
        let client = ClientInfo(
            userAgent: request.client.userAgent.replacingOccurrences(of: "\u{0}", with: "").truncated(toUTF8Bytes: 512),
            ip: request.client.ip.replacingOccurrences(of: "\u{0}", with: "").truncated(toUTF8Bytes: 64))
        try await store.createSession(
            StoredSession(
                id: sessionID, userID: request.userID, createdAt: at, authTime: request.authTime, amr: request.amr, client: client,
                lastUsedAt: at, expiresAt: at.addingTimeInterval(configuration.sessionTTL), revokedAt: nil, revokeReason: ""),
            refreshHash: Self.hash(refresh))
        let (access, ttl) = try mintAccessToken(
            userID: request.userID, sessionID: sessionID, authTime: request.authTime, amr: request.amr, claims: request.claims)
        return SessionTokens(accessToken: access, refreshToken: refresh, expiresIn: ttl, sessionID: sessionID)
    }

    /// `token.refresh`: rotate, or replay within the grace window, or detect reuse. The identity
    /// service is asked for the claims with what is left of `deadline` (the RPC caller's), or
    /// with the identity client's default timeout without one.
    public func refresh(_ request: RefreshRequest, deadline: ContinuousClock.Instant? = nil) async throws -> SessionTokens {
        try await refresh(request, deadline: deadline, revoked: { _ in })
    }

    /// `refresh`, telling `revoked` the id of a session it revoked (reuse, a deleted or
    /// disabled user) before throwing, once that revocation is committed.
    func refresh(
        _ request: RefreshRequest, deadline: ContinuousClock.Instant?, revoked: (String) -> Void
    ) async throws -> SessionTokens {
        let presented = request.refreshToken
        guard Self.isWellFormedRefreshToken(presented) else { throw TokenError.invalidRefreshToken }
        let hash = Self.hash(presented)
        guard let session = try await store.session(forRefreshHash: hash) else { throw TokenError.invalidRefreshToken }
        if session.revokedAt != nil { throw TokenError.sessionRevoked }
        let claims = try await identity.call(
            ServiceContracts.claimsForSession, ClaimsForSessionRequest(userID: session.userID), deadline: deadline)
        if !claims.exists {
            // The user is gone (a deletion whose own revocation did not complete): every session
            // of it ends here, and loses its client details as a deletion's do.
            try await store.revokeAll(userID: session.userID, reason: "user_deleted", at: clock.now, except: nil, scrubClient: true)
                .forEach(announce)
            revoked(session.id)
            throw TokenError.sessionRevoked
        }
        if claims.disabled || (claims.tokensValidAfter.map { session.authTime < $0 } ?? false) {
            let reason = claims.disabled ? "user_disabled" : "tokens_invalidated"
            if let ended = try await store.revoke(sessionID: session.id, reason: reason, at: clock.now) { announce(ended) }
            revoked(session.id)
            throw TokenError.sessionRevoked
        }
        let successor = successor(of: presented)
        let outcome = try await store.rotate(
            hash: hash, successorHash: Self.hash(successor), now: clock.now, grace: configuration.refreshGrace,
            idleTimeout: configuration.idleTimeout)
        switch outcome {
        case .invalid: throw TokenError.invalidRefreshToken
        case .revoked: throw TokenError.sessionRevoked
        case .expired: throw TokenError.sessionExpired
        case .reused(let ended):
            logger.warning("refresh token reuse detected; session \(ended.id) revoked")
            announce(ended)
            revoked(ended.id)
            throw TokenError.refreshTokenReused
        case .rotated(let s), .graceReplay(let s):
            let (access, ttl) = try mintAccessToken(userID: s.userID, sessionID: s.id, authTime: s.authTime, amr: s.amr, claims: claims)
            return SessionTokens(accessToken: access, refreshToken: successor, expiresIn: ttl, sessionID: s.id)
        }
    }

    /// Deletes sessions that ended more than `sessionRetention` ago and refresh tokens that can
    /// no longer be replayed or reused (see `SQLiteTokenStore.sweep`). Presenting a deleted token
    /// answers `invalid_refresh_token`.
    @discardableResult
    public func sweep() async throws -> SweepCounts {
        // A revoked session stays listed (`listRevocations`) as long as its access tokens may be valid.
        let retention = max(configuration.sessionRetention, configuration.accessTokenTTL + configuration.leeway)
        let counts = try await store.sweep(now: clock.now, retention: retention, idleTimeout: configuration.idleTimeout)
        try await store.pruneAudit(before: clock.now.addingTimeInterval(-configuration.auditRetention))
        if counts != SweepCounts() {
            logger.info("sweep deleted \(counts.sessions) ended sessions and \(counts.refreshTokens) old refresh tokens")
        }
        return counts
    }

    /// A user's sessions, ended ones included (`token.listSessions`).
    public func listSessions(_ request: UserSessionsRequest) async throws -> SessionList {
        let rows = try await store.sessions(userID: request.userID)
        return SessionList(sessions: rows.map {
            SessionInfo(
                sessionID: $0.id, userID: $0.userID, createdAt: $0.createdAt, authTime: $0.authTime, lastUsedAt: $0.lastUsedAt,
                expiresAt: $0.expiresAt, amr: $0.amr, client: $0.client, revokedAt: $0.revokedAt, revokeReason: $0.revokeReason)
        })
    }

    /// Verifies an access token and, if asked, that its session is not revoked (`token.verifyAccessToken`).
    public func verifyAccessToken(_ request: VerifyRequest) async throws -> VerifiedClaims {
        let claims = try await verifier.verify(request.token, now: clock.now)
        if request.checkRevoked, try await store.isRevoked(sessionID: claims.sid) { throw TokenError.sessionRevoked }
        let customJSON: String
        if claims.custom.isEmpty { customJSON = "" } else {
            customJSON = String(decoding: (try? JSONEncoder().encode(claims.custom)) ?? Data(), as: UTF8.self)
        }
        return VerifiedClaims(
            subject: claims.sub, sessionID: claims.sid, issuedAt: Date(timeIntervalSince1970: Double(claims.iat)),
            expiresAt: Date(timeIntervalSince1970: Double(claims.exp)), authTime: Date(timeIntervalSince1970: Double(claims.authTime)),
            amr: claims.amr, email: claims.email ?? "", emailVerified: claims.emailVerified, isAnonymous: claims.isAnonymous,
            tokenID: claims.jti, customClaimsJSON: customJSON)
    }

    /// The RPC surface.
    public func router() -> RPCRouter {
        var router = RPCRouter()
        router.register(TokenAPI.issueSession) { request, _ in try await self.issueSession(request) }
        router.register(TokenAPI.refresh) { request, context in
            // A session this call revoked is named in the error (`details["sessionID"]`), so the
            // gateway that answers refuses its access tokens at once, before the event arrives.
            let ended = Mutex<String?>(nil)
            do {
                return try await self.refresh(request, deadline: context.deadline, revoked: { id in ended.withLock { $0 = id } })
            } catch let error as TokenError {
                guard let id = ended.withLock({ $0 }) else { throw error }
                throw RPCError(error.code, error.message, details: [RPCError.sessionIDKey: id])
            }
        }
        router.register(TokenAPI.revokeSession) { request, _ in try await self.revokeSession(request) }
        router.register(TokenAPI.revokeAllSessions) { request, _ in try await self.revokeAllSessions(request) }
        router.register(TokenAPI.listSessions) { request, _ in try await self.listSessions(request) }
        router.register(TokenAPI.verifyAccessToken) { request, _ in try await self.verifyAccessToken(request) }
        router.register(TokenAPI.jwks) { _, _ in JWKSDocument(json: self.keys.jwksJSON(at: self.clock.now)) }
        router.register(TokenAPI.rotateKeys) { request, _ in try await self.rotateKeys(request) }
        router.register(TokenAPI.listRevocations) { _, _ in try await self.listRevocations() }
        router.register(TokenAPI.lastActivity) { request, _ in try await self.lastActivity(request) }
        router.register(TokenAPI.listAudit) { request, _ in try await self.listAudit(request) }
        return router
    }
}

extension UInt8 {
    var isBase64URL: Bool {
        (self >= 0x30 && self <= 0x39) || (self >= 0x41 && self <= 0x5A) || (self >= 0x61 && self <= 0x7A)
            || self == UInt8(ascii: "-") || self == UInt8(ascii: "_")
    }
}
