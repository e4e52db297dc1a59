import Crypto
import Foundation
import GatehouseSupport
import _CryptoExtras

/// A signing key of the fake provider: its private half signs test tokens, its public half is
/// published in the fake's JWKS.
public struct TestSigningKey: Sendable {
    /// The private key.
    public enum Material: Sendable {
        /// An RSA key (RS256).
        case rsa(_RSA.Signing.PrivateKey)
        /// An EC P-256 key (ES256).
        case p256(P256.Signing.PrivateKey)
    }

    /// The key id, the JWK's and the tokens' `kid`.
    public let kid: String
    /// The private key.
    public let material: Material

    /// A key named `kid`.
    public init(kid: String, material: Material) {
        self.kid = kid
        self.material = material
    }

    /// The default algorithm for the key's type: `RS256` or `ES256`.
    public var alg: String {
        switch material {
        case .rsa: "RS256"
        case .p256: "ES256"
        }
    }

    /// The public JWK, as a provider publishes it.
    public var jwk: [String: String] {
        switch material {
        case .rsa(let key):
            let primitives = try! key.publicKey.getKeyPrimitives()
            return ["kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                    "n": Base64URL.encode(primitives.modulus), "e": Base64URL.encode(primitives.publicExponent)]
        case .p256(let key):
            let raw = key.publicKey.rawRepresentation
            return ["kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                    "x": Base64URL.encode(raw.prefix(32)), "y": Base64URL.encode(raw.suffix(32))]
        }
    }

    /// The public key as PEM text (what a naive verifier might use as an HMAC secret).
    public var publicKeyPEM: String {
        switch material {
        case .rsa(let key): key.publicKey.pemRepresentation
        case .p256(let key): key.publicKey.pemRepresentation
        }
    }

    /// Signs `signingInput` with the key's own algorithm (RS256: PKCS#1 v1.5; ES256: r ‖ s).
    public func signature(_ signingInput: Data) -> Data {
        switch material {
        case .rsa(let key):
            return try! key.signature(for: SHA256.hash(data: signingInput), padding: .insecurePKCS1v1_5).rawRepresentation
        case .p256(let key):
            return try! key.signature(for: SHA256.hash(data: signingInput)).rawRepresentation
        }
    }

    /// A compact JWS of `claims` signed with this key: header `alg` (the key's), `kid`, `typ: JWT`;
    /// `header` entries replace or add fields (a nil value removes one).
    public func idToken(claims: [String: Any], header: [String: Any?] = [:]) -> String {
        TestTokens.sign(claims, with: self, header: header)
    }

    /// A compact JWS of `claims` encoded as JSON (keys sorted), signed with this key; `header` as
    /// in `idToken(claims:header:)`.
    public func idToken(_ claims: some Encodable, header: [String: Any?] = [:]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return TestTokens.sign(payload: try encoder.encode(claims), with: self, header: header)
    }

    // 2048-bit RSA keys take a moment to generate: once per test process.
    /// An RSA key, published by default.
    public static let rsa1 = TestSigningKey(kid: "rsa-1", material: .rsa(try! _RSA.Signing.PrivateKey(keySize: .bits2048)))
    /// A second RSA key, not published by default (a rotation publishes it).
    public static let rsa2 = TestSigningKey(kid: "rsa-2", material: .rsa(try! _RSA.Signing.PrivateKey(keySize: .bits2048)))
    /// A P-256 key, published by default.
    public static let ec1 = TestSigningKey(kid: "ec-1", material: .p256(P256.Signing.PrivateKey()))
    /// Never published, with the kid of `rsa1`: a token signed with it is forged.
    public static let rogue = TestSigningKey(kid: "rsa-1", material: .rsa(try! _RSA.Signing.PrivateKey(keySize: .bits2048)))
}

/// Builds compact JWS tokens for tests, including malicious ones.
public enum TestTokens {
    /// `object` as JSON (keys sorted) in base64url.
    public static func segment(_ object: [String: Any]) -> String {
        Base64URL.encode(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    /// A token of `claims` signed with `key`; `header` entries replace the default
    /// `alg`/`kid`/`typ` (a nil value removes one).
    public static func sign(_ claims: [String: Any], with key: TestSigningKey, header: [String: Any?] = [:]) -> String {
        sign(payload: try! JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]), with: key, header: header)
    }

    /// A token whose payload is the bytes `payload`, signed with `key`; `header` as in `sign(_:with:header:)`.
    public static func sign(payload: Data, with key: TestSigningKey, header: [String: Any?] = [:]) -> String {
        var fields: [String: Any] = ["alg": key.alg, "kid": key.kid, "typ": "JWT"]
        for (name, value) in header { fields[name] = value }
        let input = segment(fields) + "." + Base64URL.encode(payload)
        return input + "." + Base64URL.encode(key.signature(Data(input.utf8)))
    }

    /// An `alg: none` token with an empty signature.
    public static func unsigned(_ claims: [String: Any], kid: String) -> String {
        segment(["alg": "none", "kid": kid, "typ": "JWT"]) + "." + segment(claims) + "."
    }

    /// An HS256 token whose HMAC secret is `secret` (the algorithm-confusion attack uses the
    /// provider's public key bytes).
    public static func hmac(_ claims: [String: Any], kid: String, secret: Data) -> String {
        let input = segment(["alg": "HS256", "kid": kid, "typ": "JWT"]) + "." + segment(claims)
        let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: secret))
        return input + "." + Base64URL.encode(Data(mac))
    }
}

/// Claims of a typical ID token issued at `now` by `issuer` for `audience` (a string or an
/// array), valid 10 minutes; `extra` entries replace or add claims.
public func standardClaims(
    issuer: String, audience: Any, now: Date, subject: String = "001234.abcdef", extra: [String: Any] = [:]
) -> [String: Any] {
    var claims: [String: Any] = [
        "iss": issuer, "aud": audience, "sub": subject,
        "iat": Int(now.timeIntervalSince1970), "exp": Int(now.timeIntervalSince1970) + 600,
    ]
    for (name, value) in extra { claims[name] = value }
    return claims
}
