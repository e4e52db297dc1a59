import AsyncHTTPClient
import Crypto
import Foundation
import GatehouseSupport
import Logging

/// Verifies Sign in with Apple's server-to-server notifications (issue 20 §4): a POST body
/// `{"payload": "<JWS>"}` whose JWS Apple signed with the keys of its JWKS.
///
/// Checks, in order: the body and the JWS's form (`malformed`), `alg` RS256/ES256, `kid`, the
/// key and the signature (as `IDTokenVerifier`, through a `JWKSCache`, which may be the ID token
/// verifier's own); `iss` one of the provider's issuers; `aud` one of its client ids; `iat`
/// present and not in the future beyond `clockSkew`; not expired (`exp`, or `iat + maxAge` when
/// the JWS has no `exp`); then the `events` claim (a JSON object, or a string holding one) and
/// its `type`; last, replay: the same notification (by `jti`, else the JWS's SHA-256) is
/// accepted once (`ReplayGuard`, in memory: see its note on several instances).
public final class AppleNotificationVerifier: Sendable {
    /// The verifier's settings.
    public struct Options: Sendable, Equatable {
        /// How far `exp` may be past and `iat` in the future, in seconds.
        public var clockSkew: TimeInterval
        /// How long after `iat` a notification without `exp` is accepted, in seconds.
        public var maxAge: TimeInterval
        /// How many accepted notifications the replay guard remembers.
        public var replayCapacity: Int
        /// Longest body read (bytes); longer ones are `malformed`.
        public var maxBodyBytes: Int

        /// The defaults: 60 s of skew, 1 hour without `exp`, 10,000 remembered, 16 KiB bodies.
        public init(clockSkew: TimeInterval = 60, maxAge: TimeInterval = 3_600, replayCapacity: Int = 10_000, maxBodyBytes: Int = 16 * 1024) {
            self.clockSkew = clockSkew
            self.maxAge = maxAge
            self.replayCapacity = replayCapacity
            self.maxBodyBytes = maxBodyBytes
        }
    }

    /// The provider the notifications come from (its issuers, client ids and keys).
    public let provider: ProviderConfiguration
    /// The settings.
    public let options: Options
    /// The notifications already accepted.
    public let replayGuard: ReplayGuard
    private let keys: JWKSCache
    private let clock: WallClock
    private let logger: Logger

    /// A verifier for `provider` (usually `ProviderConfiguration.apple(clientIDs:)`) with its own
    /// key cache, fetching with `httpClient`.
    public convenience init(
        provider: ProviderConfiguration, httpClient: HTTPClient = .shared, cachePolicy: JWKSCache.Policy = JWKSCache.Policy(),
        clock: WallClock = .system, options: Options = Options(), logger: Logger = Logger(label: "gatehouse.apple-notifications")
    ) {
        let cache = JWKSCache(provider: provider, httpClient: httpClient, policy: cachePolicy, logger: logger)
        self.init(sharingKeysOf: cache, clock: clock, options: options, logger: logger)
    }

    /// A verifier using `cache` (e.g. `IDTokenVerifier.cache(for: "apple")`): its provider's
    /// issuers and client ids, and its keys (one fetch for both).
    public init(
        sharingKeysOf cache: JWKSCache, clock: WallClock = .system, options: Options = Options(),
        logger: Logger = Logger(label: "gatehouse.apple-notifications")
    ) {
        self.provider = cache.provider
        self.keys = cache
        self.clock = clock
        self.options = options
        self.replayGuard = ReplayGuard(capacity: options.replayCapacity)
        self.logger = logger
    }

    /// Verifies the notification `body` (the POST body Apple sent) at `now` (by default the
    /// injected clock) and returns its event; an accepted notification is refused afterwards.
    public func verify(body: Data, now: Date? = nil) async throws(AppleNotificationError) -> AppleNotification {
        do throws(AppleNotificationError) {
            return try await check(body, now: now ?? clock.now)
        } catch {
            // The code and the reason only: never the notification.
            logger.debug(
                "apple notification refused",
                metadata: ["provider": "\(provider.name)", "code": "\(error.code)", "reason": "\(error.reason?.rawValue ?? "-")"])
            throw error
        }
    }

    private struct Body: Decodable {
        var payload: String
    }

    private func check(_ body: Data, now: Date) async throws(AppleNotificationError) -> AppleNotification {
        guard body.count <= options.maxBodyBytes, let payload = try? JSONDecoder().decode(Body.self, from: body).payload else {
            throw .invalidToken(.malformed)
        }
        let jws: SignedJWS
        do throws(ProviderTokenError) {
            jws = try SignedJWS.parse(payload, maxBytes: options.maxBodyBytes)
        } catch {
            throw AppleNotificationError(error)
        }
        guard let claims = try? JSONDecoder().decode(NotificationClaims.self, from: Data(jws.payload)) else {
            throw .invalidToken(.malformed)
        }
        do throws(ProviderTokenError) {
            try await jws.verifySignature(keys: keys, now: now)
        } catch {
            throw AppleNotificationError(error)
        }
        guard let iss = claims.iss else { throw .invalidToken(.missingClaim) }
        guard provider.issuers.contains(iss) else { throw .invalidToken(.wrongIssuer) }
        guard let aud = claims.aud, !aud.isEmpty else { throw .invalidToken(.missingClaim) }
        guard let audience = aud.first(where: provider.clientIDs.contains) else { throw .invalidToken(.wrongAudience) }
        guard let iatSeconds = claims.iat else { throw .invalidToken(.missingClaim) }
        let iat = Date(timeIntervalSince1970: iatSeconds)
        let expiry = claims.exp.map { Date(timeIntervalSince1970: $0) } ?? iat.addingTimeInterval(options.maxAge)
        guard now.timeIntervalSince(expiry) < options.clockSkew else { throw .invalidToken(.expired) }
        guard iat.timeIntervalSince(now) <= options.clockSkew else { throw .invalidToken(.issuedInFuture) }

        guard let event = claims.events else { throw .invalidEvent("the events claim is missing or not a JSON object") }
        guard let typeName = event.type else { throw .invalidEvent("the event has no type") }
        guard let type = AppleNotification.EventType(rawValue: typeName) else {
            throw .unknownEventType(String(typeName.prefix(64)))
        }
        guard let sub = event.sub, !sub.isEmpty else { throw .invalidEvent("the event has no sub") }
        guard let eventTime = event.eventTime else { throw .invalidEvent("the event has no event_time") }

        let replayID = "\(provider.name)\u{0}notification\u{0}\(iss)\u{0}"
            + (claims.jti.map { "jti:" + $0 } ?? "sha256:" + IDTokenVerifier.sha256Hex(payload))
        guard replayGuard.accept(replayID, until: expiry.addingTimeInterval(options.clockSkew), now: now) else {
            throw .invalidToken(.replayed)
        }
        var note = AppleNotification(
            type: type, sub: sub, email: event.email, isPrivateEmail: event.isPrivateEmail,
            eventTime: Date(timeIntervalSince1970: eventTime / 1000), audience: audience, issuedAt: iat, jti: claims.jti)
        note.replayID = replayID
        return note
    }
}
