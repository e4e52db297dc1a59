import Crypto
import Foundation
import GatehouseSupport
import Synchronization

/// The `client_secret` Apple's token and revoke endpoints want (Sign in with Apple's server
/// side, issue 20 §4): an ES256 JWT with header `alg: ES256`, `kid` the key's id, and claims
/// `iss` the team id, `iat`, `exp` (at most 180 days later), `aud` `https://appleid.apple.com`
/// and `sub` the client id (services id or bundle id) the request is made for; signed with the
/// team's P-256 private key (the `.p8` file Apple hands out: PKCS#8 PEM).
///
/// A secret is made once per client id and reused until it is within `renewBefore` of its
/// `exp` (or the clock went back before its `iat`); time comes from the injected `WallClock`.
/// Neither the key nor a secret is ever logged or put in an error or a description.
public final class AppleClientSecret: Sendable, CustomStringConvertible {
    /// The longest lifetime Apple accepts: 15,777,000 s (about 6 months).
    public static let maximumLifetime: TimeInterval = 15_777_000
    /// The audience Apple expects.
    public static let appleAudience = "https://appleid.apple.com"

    /// The Apple developer team id (`iss`).
    public let teamID: String
    /// The key's id in the developer account (`kid`).
    public let keyID: String
    /// The client ids secrets are made for (`sub`).
    public let clientIDs: [String]
    /// How long a secret is valid (`exp - iat`).
    public let lifetime: TimeInterval
    /// How long before its `exp` a secret is replaced by a new one.
    public let renewBefore: TimeInterval
    /// `aud` (Apple's; another value only for tests against a fake).
    public let audience: String

    private let key: P256.Signing.PrivateKey
    private let clock: WallClock
    private let cache = Mutex<[String: Made]>([:])

    private struct Made {
        var secret: String
        var iat: Date
        var exp: Date
    }

    /// A maker of secrets for `clientIDs` signed with `privateKeyPEM` (the `.p8` file's text:
    /// PKCS#8, or SEC 1, PEM), valid `lifetime` seconds (default 1 day, at most
    /// `maximumLifetime`) and renewed `renewBefore` seconds before they expire (default 1 hour,
    /// less than `lifetime`). Throws a `ProviderConfigurationError` naming what is wrong (never
    /// the key).
    public init(
        teamID: String, keyID: String, clientIDs: [String], privateKeyPEM: String, lifetime: TimeInterval = 86_400,
        renewBefore: TimeInterval = 3_600, audience: String = AppleClientSecret.appleAudience, clock: WallClock = .system
    ) throws(ProviderConfigurationError) {
        guard !teamID.isEmpty, !keyID.isEmpty else {
            throw ProviderConfigurationError("apple: the client secret needs the team id and the key id of the .p8 key")
        }
        let clients = clientIDs.filter { !$0.isEmpty }
        guard !clients.isEmpty else { throw ProviderConfigurationError("apple: the client secret needs at least one client id") }
        guard lifetime > 0, lifetime <= Self.maximumLifetime else {
            throw ProviderConfigurationError("apple: the client secret's lifetime must be more than 0 and at most 15777000 s (180 days)")
        }
        guard renewBefore >= 0, renewBefore < lifetime else {
            throw ProviderConfigurationError("apple: the client secret's renewal margin must be shorter than its lifetime")
        }
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        } catch {
            throw ProviderConfigurationError(
                "apple: the private key is not a P-256 key in PEM (the .p8 file from the developer account, \"BEGIN PRIVATE KEY\")")
        }
        self.teamID = teamID
        self.keyID = keyID
        self.clientIDs = clients
        self.lifetime = lifetime
        self.renewBefore = renewBefore
        self.audience = audience
        self.clock = clock
    }

    /// The secret for `clientID` at the clock's time: the cached one while it is more than
    /// `renewBefore` from its `exp`, else a new one. Throws when `clientID` is not configured.
    public func secret(for clientID: String) throws(ProviderConfigurationError) -> String {
        guard clientIDs.contains(clientID) else {
            throw ProviderConfigurationError("apple: no client secret is configured for client id \(clientID.debugDescription)")
        }
        let now = clock.now
        return cache.withLock { cache in
            if let made = cache[clientID], now >= made.iat, now < made.exp.addingTimeInterval(-renewBefore) {
                return made.secret
            }
            let made = make(for: clientID, now: now)
            cache[clientID] = made
            return made.secret
        }
    }

    /// Team, key and client ids only: never the key or a secret.
    public var description: String {
        "AppleClientSecret(team: \(teamID), key: \(keyID), clients: \(clientIDs))"
    }

    private struct Header: Encodable {
        var alg = "ES256"
        var kid: String
    }

    private struct Claims: Encodable {
        var iss: String
        var iat: Int
        var exp: Int
        var aud: String
        var sub: String
    }

    private func make(for clientID: String, now: Date) -> Made {
        // Whole seconds: iat is not after now, exp is at most `lifetime` after iat.
        let iat = now.timeIntervalSince1970.rounded(.down)
        let exp = iat + lifetime.rounded(.down)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = try! encoder.encode(Header(kid: keyID))
        let claims = try! encoder.encode(Claims(iss: teamID, iat: Int(iat), exp: Int(exp), aud: audience, sub: clientID))
        let input = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        // JWS ES256: r ‖ s, 32 bytes each (RFC 7518 §3.4), not DER.
        let signature = try! key.signature(for: SHA256.hash(data: Data(input.utf8))).rawRepresentation
        return Made(
            secret: input + "." + Base64URL.encode(signature), iat: Date(timeIntervalSince1970: iat),
            exp: Date(timeIntervalSince1970: exp))
    }
}
