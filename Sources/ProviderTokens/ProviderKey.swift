import Crypto
import Foundation
import GatehouseSupport
import _CryptoExtras

/// The signature algorithms an ID token may use. Everything else (`none`, HS256/384/512, PS*,
/// ES384, EdDSA, …) is refused before any key is looked at.
public enum ProviderSignatureAlgorithm: String, Sendable, CaseIterable {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (Apple, Google).
    case rs256 = "RS256"
    /// ECDSA on P-256 with SHA-256.
    case es256 = "ES256"
}

/// One public signing key of a provider, from its JWKS.
public enum ProviderKey: Sendable {
    /// An RSA key (`kty: RSA`), for RS256.
    case rsa(_RSA.Signing.PublicKey)
    /// An EC P-256 key (`kty: EC`, `crv: P-256`), for ES256.
    case p256(P256.Signing.PublicKey)

    /// Whether the key can check a signature made with `algorithm`: RSA keys only RS256, P-256
    /// keys only ES256 (so a token cannot choose how its key is used).
    func fits(_ algorithm: ProviderSignatureAlgorithm) -> Bool {
        switch (self, algorithm) {
        case (.rsa, .rs256), (.p256, .es256): true
        default: false
        }
    }

    /// Whether `signature` signs `signingInput` (the ASCII `header.payload`) under `algorithm`.
    func verifies(_ signature: [UInt8], of signingInput: some DataProtocol, algorithm: ProviderSignatureAlgorithm) -> Bool {
        switch (self, algorithm) {
        case (.rsa(let key), .rs256):
            let digest = SHA256.hash(data: signingInput)
            return key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: digest, padding: .insecurePKCS1v1_5)
        case (.p256(let key), .es256):
            // JWS ES256 signatures are r ‖ s, 32 bytes each (RFC 7518 §3.4), never DER.
            guard signature.count == 64, let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else {
                return false
            }
            return key.isValidSignature(parsed, for: SHA256.hash(data: signingInput))
        default:
            return false
        }
    }
}

/// A parsed JWKS document: the usable signing keys by `kid`.
struct ProviderKeySet: Sendable {
    var keys: [String: ProviderKey]

    /// Reads a JWKS document. Keys without a `kid`, with `use` other than `sig`, with an `alg`
    /// outside RS256/ES256, of another type or curve, or that do not parse are skipped (a
    /// provider may publish keys for other uses); a document that is not a JWKS throws.
    static func parse(_ data: Data) throws(JWKSDocumentError) -> ProviderKeySet {
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let list = root["keys"] as? [Any]
        else { throw JWKSDocumentError(detail: "the JWKS document is not a JSON object with a keys array") }
        var keys: [String: ProviderKey] = [:]
        for case let entry as [String: Any] in list {
            guard let kid = entry["kid"] as? String, !kid.isEmpty else { continue }
            if let use = entry["use"] as? String, use != "sig" { continue }
            if let alg = entry["alg"] as? String, ProviderSignatureAlgorithm(rawValue: alg) == nil { continue }
            guard let key = key(from: entry) else { continue }
            keys[kid] = key
        }
        return ProviderKeySet(keys: keys)
    }

    /// The bytes of a base64url member of a JWK (trailing `=` padding, which some providers
    /// write, tolerated).
    static func member(_ jwk: [String: Any], _ name: String) -> [UInt8]? {
        guard var text = jwk[name] as? String else { return nil }
        while text.hasSuffix("=") { text.removeLast() }
        return Base64URL.decodeBytes(text)
    }

    /// An RSA (n, e; 2048 bits or more) or EC P-256 (x, y) public key from a JWK's members.
    static func key(from jwk: [String: Any]) -> ProviderKey? {
        switch jwk["kty"] as? String {
        case "RSA":
            guard let n = member(jwk, "n"),
                let e = member(jwk, "e"),
                let key = try? _RSA.Signing.PublicKey(n: n, e: e)
            else { return nil }
            if let alg = jwk["alg"] as? String, alg != ProviderSignatureAlgorithm.rs256.rawValue { return nil }
            return .rsa(key)
        case "EC":
            guard jwk["crv"] as? String == "P-256",
                let x = member(jwk, "x"), x.count == 32,
                let y = member(jwk, "y"), y.count == 32,
                let key = try? P256.Signing.PublicKey(rawRepresentation: x + y)
            else { return nil }
            if let alg = jwk["alg"] as? String, alg != ProviderSignatureAlgorithm.es256.rawValue { return nil }
            return .p256(key)
        default:
            return nil
        }
    }
}

/// A JWKS or discovery document that does not read as one (reported as `provider_unavailable`).
struct JWKSDocumentError: Error {
    var detail: String
}
