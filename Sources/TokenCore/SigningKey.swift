import Crypto
import Foundation
import JWTKit
import _CryptoExtras
import GatehouseSupport

/// The algorithms Gatehouse signs with.
public enum SigningAlgorithm: String, Sendable, CaseIterable, Codable {
    case es256 = "ES256"
    case eddsa = "EdDSA"
    case rs256 = "RS256"
}

/// A signing key: its private material (PEM for ES256/RS256, raw 32 bytes base64url for EdDSA),
/// its public JWK, and its `kid` (the RFC 7638 thumbprint of the public JWK).
public struct SigningKey: Sendable, Hashable {
    /// The algorithm the key signs with; a token's `alg` must be this.
    public let algorithm: SigningAlgorithm
    /// The key id (the RFC 7638 thumbprint of its public JWK), the `kid` of its tokens.
    public let kid: String
    /// The private key, serialized (never logged).
    public let privateMaterial: String
    /// The public JWK members (kty, crv, x, y / n, e), without kid/alg/use.
    public let publicJWK: [String: String]

    /// Generates a new key.
    public static func generate(_ algorithm: SigningAlgorithm) throws -> SigningKey {
        switch algorithm {
        case .es256:
            let key = P256.Signing.PrivateKey()
            return try SigningKey(algorithm: .es256, privateMaterial: key.pemRepresentation)
        case .eddsa:
            let key = Curve25519.Signing.PrivateKey()
            return try SigningKey(algorithm: .eddsa, privateMaterial: Base64URL.encode(key.rawRepresentation))
        case .rs256:
            let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            return try SigningKey(algorithm: .rs256, privateMaterial: key.pemRepresentation)
        }
    }

    /// Rebuilds a key from its stored private material; derives the public JWK and kid.
    public init(algorithm: SigningAlgorithm, privateMaterial: String) throws {
        self.algorithm = algorithm
        self.privateMaterial = privateMaterial
        switch algorithm {
        case .es256:
            let key = try P256.Signing.PrivateKey(pemRepresentation: privateMaterial)
            let raw = key.publicKey.rawRepresentation  // x || y
            publicJWK = [
                "kty": "EC", "crv": "P-256",
                "x": Base64URL.encode(raw.prefix(32)), "y": Base64URL.encode(raw.suffix(32)),
            ]
        case .eddsa:
            guard let raw = Base64URL.decode(privateMaterial) else { throw SigningKeyError.corrupt }
            let key = try Curve25519.Signing.PrivateKey(rawRepresentation: raw)
            publicJWK = ["kty": "OKP", "crv": "Ed25519", "x": Base64URL.encode(key.publicKey.rawRepresentation)]
        case .rs256:
            let key = try _RSA.Signing.PrivateKey(pemRepresentation: privateMaterial)
            let primitives = try key.publicKey.getKeyPrimitives()
            publicJWK = ["kty": "RSA", "n": Base64URL.encode(primitives.modulus), "e": Base64URL.encode(primitives.publicExponent)]
        }
        kid = Self.thumbprint(publicJWK)
    }

    /// RFC 7638: SHA-256 over the required members in lexicographic order, no whitespace.
    public static func thumbprint(_ jwk: [String: String]) -> String {
        let required: [String]
        switch jwk["kty"] {
        case "EC": required = ["crv", "kty", "x", "y"]
        case "OKP": required = ["crv", "kty", "x"]
        default: required = ["e", "kty", "n"]
        }
        let json = "{" + required.map { "\"\($0)\":\"\(jwk[$0] ?? "")\"" }.joined(separator: ",") + "}"
        return Base64URL.encode(Data(SHA256.hash(data: Data(json.utf8))))
    }

    /// The public JWK with `kid`, `alg` and `use`.
    public var jwk: [String: String] {
        var jwk = publicJWK
        jwk["kid"] = kid
        jwk["alg"] = algorithm.rawValue
        jwk["use"] = "sig"
        return jwk
    }

    /// Adds this key (private, for signing) to a jwt-kit collection under its kid.
    public func addSigner(to keys: JWTKeyCollection) async throws {
        let id = JWKIdentifier(string: kid)
        switch algorithm {
        case .es256:
            await keys.add(ecdsa: try ES256PrivateKey(pem: privateMaterial), kid: id)
        case .eddsa:
            guard let raw = Base64URL.decode(privateMaterial) else { throw SigningKeyError.corrupt }
            await keys.add(eddsa: EdDSA.PrivateKey(backing: try Curve25519.Signing.PrivateKey(rawRepresentation: raw)), kid: id)
        case .rs256:
            await keys.add(rsa: try Insecure.RSA.PrivateKey(pem: privateMaterial), digestAlgorithm: .sha256, kid: id)
        }
    }
}

/// Why a signing key cannot be used.
public enum SigningKeyError: Error, Equatable {
    /// The stored private material does not decode.
    case corrupt
    /// No key has been loaded into the key ring yet.
    case noActiveKey
}
