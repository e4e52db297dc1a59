import Crypto
import Foundation
import GatehouseSupport
import _CryptoExtras

/// A signing key of the fake provider: its private half signs test tokens, its public half is
/// published in the fake's JWKS.
struct TestSigningKey: Sendable {
    enum Material: Sendable {
        case rsa(_RSA.Signing.PrivateKey)
        case p256(P256.Signing.PrivateKey)
    }

    let kid: String
    let material: Material

    /// The default algorithm for the key's type.
    var alg: String {
        switch material {
        case .rsa: "RS256"
        case .p256: "ES256"
        }
    }

    /// The public JWK, as a provider publishes it.
    var jwk: [String: String] {
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

    /// The public key's bytes as a naive verifier might use them as an HMAC secret (the PEM text).
    var publicKeyPEM: String {
        switch material {
        case .rsa(let key): key.publicKey.pemRepresentation
        case .p256(let key): key.publicKey.pemRepresentation
        }
    }

    /// Signs `signingInput` with the key's own algorithm.
    func signature(_ signingInput: Data) -> Data {
        switch material {
        case .rsa(let key):
            return try! key.signature(for: SHA256.hash(data: signingInput), padding: .insecurePKCS1v1_5).rawRepresentation
        case .p256(let key):
            return try! key.signature(for: SHA256.hash(data: signingInput)).rawRepresentation
        }
    }

    // 2048-bit RSA keys take a moment to generate: once per test process.
    static let rsa1 = TestSigningKey(kid: "rsa-1", material: .rsa(try! _RSA.Signing.PrivateKey(keySize: .bits2048)))
    static let rsa2 = TestSigningKey(kid: "rsa-2", material: .rsa(try! _RSA.Signing.PrivateKey(keySize: .bits2048)))
    static let ec1 = TestSigningKey(kid: "ec-1", material: .p256(P256.Signing.PrivateKey()))
    /// Never published: a token signed with it is forged.
    static let rogue = TestSigningKey(kid: "rsa-1", material: .rsa(try! _RSA.Signing.PrivateKey(keySize: .bits2048)))
}

/// Builds compact JWS tokens for the tests, including malicious ones.
enum TestTokens {
    static func segment(_ object: [String: Any]) -> String {
        Base64URL.encode(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    /// A token signed with `key`; `header` entries replace the default `alg`/`kid`/`typ` (a nil
    /// value removes one).
    static func sign(_ claims: [String: Any], with key: TestSigningKey, header: [String: Any?] = [:]) -> String {
        var fields: [String: Any] = ["alg": key.alg, "kid": key.kid, "typ": "JWT"]
        for (name, value) in header { fields[name] = value }
        let input = segment(fields) + "." + segment(claims)
        return input + "." + Base64URL.encode(key.signature(Data(input.utf8)))
    }

    /// An `alg: none` token with an empty signature.
    static func unsigned(_ claims: [String: Any], kid: String) -> String {
        segment(["alg": "none", "kid": kid, "typ": "JWT"]) + "." + segment(claims) + "."
    }

    /// An HS256 token whose HMAC secret is `secret` (the algorithm-confusion attack uses the
    /// provider's public key bytes).
    static func hmac(_ claims: [String: Any], kid: String, secret: Data) -> String {
        let input = segment(["alg": "HS256", "kid": kid, "typ": "JWT"]) + "." + segment(claims)
        let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: secret))
        return input + "." + Base64URL.encode(Data(mac))
    }
}

/// Claims of a typical token issued at `now` for `audience`, valid 10 minutes.
func standardClaims(
    issuer: String, audience: Any, now: Date, subject: String = "001234.abcdef", extra: [String: Any] = [:]
) -> [String: Any] {
    var claims: [String: Any] = [
        "iss": issuer, "aud": audience, "sub": subject,
        "iat": Int(now.timeIntervalSince1970), "exp": Int(now.timeIntervalSince1970) + 600,
    ]
    for (name, value) in extra { claims[name] = value }
    return claims
}
