import AsyncHTTPClient
import Crypto
import Foundation
import GatehouseSupport
import Logging

/// Verifies ID tokens of Sign in with Apple, Google and generic OpenID Connect providers
/// (issue 20 §1): the signature against the provider's JWKS, then the claims, the nonce, and
/// that the token was not accepted before.
///
/// Checks, in order (the first failing one is the refusal's reason):
/// 1. three base64url parts of JSON (`malformed`), no `crit` header;
/// 2. `alg` RS256 or ES256 (`none` and every HMAC algorithm refused: an HS256 token "signed"
///    with a provider's public key never reaches a key), `kid` present;
/// 3. the provider's key with that `kid` (`JWKSCache`: a refetch on an unknown `kid`), of the
///    type `alg` needs, and the signature;
/// 4. `iss` exactly one of the provider's issuers, `aud` (string or array) naming one of its
///    client ids, `sub`, `exp` not past and `iat` not in the future beyond `clockSkew`;
/// 5. the nonce: when the app sends one, the token must carry it (Apple: its SHA-256 in
///    lowercase hex); when the app sends none, a token carrying a nonce is refused;
/// 6. replay: a token accepted before (by `jti`, else by the SHA-256 of the whole token) is
///    refused until its `exp` (`ReplayGuard`, in memory: see its note on several instances).
///
/// Neither the token nor a nonce is ever put in an error or a log line.
public final class IDTokenVerifier: Sendable {
    /// The verifier's settings.
    public struct Options: Sendable, Equatable {
        /// How far `exp` may be past and `iat` in the future (clocks differ), in seconds.
        public var clockSkew: TimeInterval
        /// The JWKS caches' limits.
        public var cachePolicy: JWKSCache.Policy
        /// How many accepted tokens the replay guard remembers.
        public var replayCapacity: Int
        /// Longest token read (bytes); longer ones are `malformed`.
        public var maxTokenBytes: Int

        /// The defaults: 60 s of skew, the cache's production policy, 100,000 remembered tokens, 16 KiB tokens.
        public init(
            clockSkew: TimeInterval = 60, cachePolicy: JWKSCache.Policy = JWKSCache.Policy(), replayCapacity: Int = 100_000,
            maxTokenBytes: Int = 16 * 1024
        ) {
            self.clockSkew = clockSkew
            self.cachePolicy = cachePolicy
            self.replayCapacity = replayCapacity
            self.maxTokenBytes = maxTokenBytes
        }
    }

    /// The settings.
    public let options: Options
    /// The tokens already accepted.
    public let replayGuard: ReplayGuard
    private let caches: [String: JWKSCache]
    private let clock: WallClock
    private let logger: Logger

    /// A verifier for `providers` (names must be distinct), fetching keys with `httpClient`
    /// (its owner shuts it down) and reading the time from `clock`.
    public init(
        providers: [ProviderConfiguration], httpClient: HTTPClient = .shared, clock: WallClock = .system,
        options: Options = Options(), logger: Logger = Logger(label: "gatehouse.provider-tokens")
    ) throws(ProviderConfigurationError) {
        var caches: [String: JWKSCache] = [:]
        for provider in providers {
            guard caches[provider.name] == nil else {
                throw ProviderConfigurationError("provider \(provider.name) is configured twice")
            }
            caches[provider.name] = JWKSCache(provider: provider, httpClient: httpClient, policy: options.cachePolicy, logger: logger)
        }
        self.caches = caches
        self.clock = clock
        self.options = options
        self.replayGuard = ReplayGuard(capacity: options.replayCapacity)
        self.logger = logger
    }

    /// The configured provider names.
    public var providerNames: [String] { caches.keys.sorted() }

    /// The key cache of the provider named `name`.
    public func cache(for name: String) -> JWKSCache? { caches[name] }

    /// Verifies `idToken` as issued by the provider named `provider` for one of its client ids;
    /// `nonce` is the raw nonce the app used for the sign-in (nil if it used none); `now`
    /// defaults to the injected clock. Returns the verified claims, or throws
    /// `ProviderTokenError` (`invalid_provider_token` with its reason, `provider_unavailable`,
    /// `unknown_provider`). An accepted token is recorded: the same token is refused afterwards.
    public func verify(
        idToken: String, provider name: String, nonce: String?, now: Date? = nil
    ) async throws(ProviderTokenError) -> VerifiedProviderToken {
        guard let cache = caches[name] else { throw .unknownProvider(name) }
        let now = now ?? clock.now
        do throws(ProviderTokenError) {
            return try await check(idToken, cache: cache, nonce: nonce, now: now)
        } catch {
            // The provider and the reason only: never the token or the nonce.
            logger.debug(
                "provider token refused",
                metadata: ["provider": "\(name)", "code": "\(error.code)", "reason": "\(error.reason?.rawValue ?? "-")"])
            throw error
        }
    }

    private func check(_ token: String, cache: JWKSCache, nonce: String?, now: Date) async throws(ProviderTokenError) -> VerifiedProviderToken {
        let provider = cache.provider
        let jws = try SignedJWS.parse(token, maxBytes: options.maxTokenBytes)
        guard let claims = try? JSONDecoder().decode(IDTokenPayload.self, from: Data(jws.payload)) else {
            throw .invalidToken(.malformed)
        }
        try await jws.verifySignature(keys: cache, now: now)

        guard let iss = claims.iss else { throw .invalidToken(.missingClaim) }
        guard provider.issuers.contains(iss) else { throw .invalidToken(.wrongIssuer) }
        guard let aud = claims.aud, !aud.isEmpty else { throw .invalidToken(.missingClaim) }
        guard aud.contains(where: provider.clientIDs.contains) else { throw .invalidToken(.wrongAudience) }
        guard let sub = claims.sub, !sub.isEmpty, let expSeconds = claims.exp, let iatSeconds = claims.iat else {
            throw .invalidToken(.missingClaim)
        }
        let exp = Date(timeIntervalSince1970: expSeconds)
        let iat = Date(timeIntervalSince1970: iatSeconds)
        guard now.timeIntervalSince(exp) < options.clockSkew else { throw .invalidToken(.expired) }
        guard iat.timeIntervalSince(now) <= options.clockSkew else { throw .invalidToken(.issuedInFuture) }

        try Self.checkNonce(sent: nonce, inToken: claims.nonce, form: provider.nonceForm)

        let replayID = "\(provider.name)\u{0}\(iss)\u{0}" + (claims.jti.map { "jti:" + $0 } ?? "sha256:" + Self.sha256Hex(token))
        // Kept until exp plus the skew: the token is accepted that long.
        guard replayGuard.accept(replayID, until: exp.addingTimeInterval(options.clockSkew), now: now) else {
            throw .invalidToken(.replayed)
        }
        var verified = VerifiedProviderToken(
            provider: provider.name, sub: sub, email: claims.email, emailVerified: claims.emailVerified ?? false,
            isPrivateEmail: claims.isPrivateEmail ?? false, iss: iss, aud: aud, exp: exp, iat: iat, nonce: claims.nonce,
            jti: claims.jti)
        verified.replayID = replayID
        verified.replayUntil = exp.addingTimeInterval(options.clockSkew)
        return verified
    }

    /// The nonce rule: sent ⇒ carried and equal (Apple: the SHA-256 hex of the sent one);
    /// not sent ⇒ not carried.
    static func checkNonce(sent: String?, inToken: String?, form: ProviderConfiguration.NonceForm) throws(ProviderTokenError) {
        guard let sent else {
            if inToken != nil { throw .invalidToken(.unexpectedNonce) }
            return
        }
        guard let inToken else { throw .invalidToken(.nonceMissing) }
        let expected = form == .sha256Hex ? sha256Hex(sent) : sent
        guard constantTimeEqual(expected, inToken) else { throw .invalidToken(.nonceMismatch) }
    }

    /// SHA-256 of `text`'s UTF-8 as 64 lowercase hex digits.
    static func sha256Hex(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Equality without an early exit on the first differing byte.
    static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}
