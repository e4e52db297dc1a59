import Crypto
import Foundation
import GatehouseSupport
import Synchronization

/// Sign in with Apple's server side, as the fake provider serves it (`fake.apple`):
///
/// - `POST /auth/token` (`grant_type=authorization_code`): checks the `client_secret` JWT (ES256
///   over the P-256 public key of a registered developer account, `kid`, `iss` the team id, `sub`
///   the `client_id`, `aud` `https://appleid.apple.com`, `iat`/`exp` on the fake's clock, at most
///   180 days apart; otherwise 400 `invalid_client`), then the code: a registered, unused code of
///   that client (and its redirect URI, if registered) answers the refresh token registered with
///   it and an ID token the fake mints with `idTokenKey`; any other code 400 `invalid_grant`;
/// - `POST /auth/revoke`: the same secret check, then records the token (`revocations`), 200;
/// - `notificationBody(…)`: a server-to-server notification `{"payload": "<JWS>"}` signed with
///   a key of the fake.
///
/// Each endpoint has a mode (`up`, `down`: 503, `hang`/`hangInBody`: no answer until the fake stops).
public final class FakeAppleEndpoints: Sendable {
    /// A developer account whose client secrets the fake accepts.
    public struct Account: Sendable {
        /// The team id (`iss` of the secret).
        public var teamID: String
        /// The key id (`kid` of the secret).
        public var keyID: String
        /// The P-256 public key of the team's `.p8` key.
        public var publicKey: P256.Signing.PublicKey
        /// The client ids (`sub` of the secret, `client_id`) of the account.
        public var clientIDs: [String]

        /// An account.
        public init(teamID: String, keyID: String, publicKey: P256.Signing.PublicKey, clientIDs: [String]) {
            self.teamID = teamID
            self.keyID = keyID
            self.publicKey = publicKey
            self.clientIDs = clientIDs
        }
    }

    /// A token the revoke endpoint was asked to revoke.
    public struct Revocation: Sendable, Equatable {
        /// `token`.
        public var token: String
        /// `token_type_hint`, if sent.
        public var tokenTypeHint: String?
        /// `client_id`.
        public var clientID: String

        /// A revocation (to compare with `revocations`).
        public init(token: String, tokenTypeHint: String?, clientID: String) {
            self.token = token
            self.tokenTypeHint = tokenTypeHint
            self.clientID = clientID
        }
    }

    struct Grant {
        var clientID: String
        var redirectURI: String?
        var refreshToken: String
        var claims: Data
        var used = false
    }

    struct State {
        var accounts: [Account] = []
        var grants: [String: Grant] = [:]
        var tokenMode = FakeOpenIDProvider.Mode.up
        var revokeMode = FakeOpenIDProvider.Mode.up
        var revocations: [Revocation] = []
        var tokenRequests = 0
        var revokeRequests = 0
        var refusedSecrets: [String] = []
        var clock = WallClock.system
        var idTokenKey = TestSigningKey.rsa1
        var issuer = "https://appleid.apple.com"
    }

    let state = Mutex(State())

    init() {}

    /// Accepts client secrets of `account` from now on.
    public func register(_ account: Account) { state.withLock { $0.accounts.append(account) } }

    /// Registers an authorization code of `clientID` for the user `subject`: its exchange answers
    /// a refresh token (returned) and an ID token with `iss`, `aud` `clientID`, `sub`, `iat`/`exp`
    /// (10 minutes) and a `jti`, plus `claims` (email, nonce, …). With `redirectURI`, the exchange
    /// must send the same one. A code is used once.
    @discardableResult
    public func register(
        code: String, clientID: String, subject: String = "001234.abcdef", redirectURI: String? = nil, claims: [String: Any] = [:]
    ) -> String {
        let refreshToken = "r." + UUID().uuidString.lowercased()
        let data = try! JSONSerialization.data(withJSONObject: claims.merging(["sub": subject]) { $1 }, options: [.sortedKeys])
        state.withLock {
            $0.grants[code] = Grant(clientID: clientID, redirectURI: redirectURI, refreshToken: refreshToken, claims: data)
        }
        return refreshToken
    }

    /// Sets how the token endpoint answers.
    public func set(tokenMode mode: FakeOpenIDProvider.Mode) { state.withLock { $0.tokenMode = mode } }
    /// Sets how the revoke endpoint answers.
    public func set(revokeMode mode: FakeOpenIDProvider.Mode) { state.withLock { $0.revokeMode = mode } }
    /// Sets the clock the fake checks secrets against and stamps its tokens with (default: the system's).
    public func set(clock: WallClock) { state.withLock { $0.clock = clock } }
    /// Sets the key the fake signs ID tokens and notifications with by default (default `rsa1`).
    public func set(idTokenKey key: TestSigningKey) { state.withLock { $0.idTokenKey = key } }
    /// Sets the `iss` of the fake's ID tokens and notifications (default `https://appleid.apple.com`).
    public func set(issuer: String) { state.withLock { $0.issuer = issuer } }

    /// The tokens revoked, in order.
    public var revocations: [Revocation] { state.withLock { $0.revocations } }
    /// How many requests reached the token endpoint.
    public var tokenRequests: Int { state.withLock { $0.tokenRequests } }
    /// How many requests reached the revoke endpoint.
    public var revokeRequests: Int { state.withLock { $0.revokeRequests } }
    /// Why client secrets were refused (one line each), to debug a test.
    public var refusedSecrets: [String] { state.withLock { $0.refusedSecrets } }

    /// A notification body `{"payload": "<JWS>"}` as Apple posts it: claims `iss`, `aud`, `iat`
    /// (the fake's clock), a fresh `jti` and `events` (`type`, `sub`, `event_time` in ms, and
    /// `email`/`is_private_email` when given; as a JSON string unless `eventsAsString` is false),
    /// with `claims` replacing or removing (nil) any of them, signed with `key` (default `idTokenKey`).
    public func notificationBody(
        type: String, audience: String, subject: String = "001234.abcdef", email: String? = nil, isPrivateEmail: Any? = nil,
        eventsAsString: Bool = true, claims: [String: Any?] = [:], key: TestSigningKey? = nil
    ) -> Data {
        let (now, issuer, defaultKey) = state.withLock { ($0.clock.now, $0.issuer, $0.idTokenKey) }
        var event: [String: Any] = ["type": type, "sub": subject, "event_time": Int(now.timeIntervalSince1970 * 1000)]
        if let email { event["email"] = email }
        if let isPrivateEmail { event["is_private_email"] = isPrivateEmail }
        let events: Any =
            eventsAsString
            ? String(decoding: try! JSONSerialization.data(withJSONObject: event, options: [.sortedKeys]), as: UTF8.self) : event
        var all: [String: Any] = [
            "iss": issuer, "aud": audience, "iat": Int(now.timeIntervalSince1970), "jti": UUID().uuidString, "events": events,
        ]
        for (name, value) in claims { all[name] = value }
        let jws = TestTokens.sign(all, with: key ?? defaultKey, header: ["typ": nil])
        return try! JSONSerialization.data(withJSONObject: ["payload": jws], options: [.sortedKeys])
    }
}
