import Crypto
import Foundation
import JWTKit
import _CryptoExtras

/// The algorithms Gatehouse signs with.
public enum SigningAlgorithm: String, Sendable, CaseIterable, Codable {
    case es256 = "ES256"
    case eddsa = "EdDSA"
    case rs256 = "RS256"
}

/// A signing key: its private material (PEM for ES256/RS256, raw 32 bytes base64url for EdDSA),
/// its public JWK, and its `kid` (the RFC 7638 thumbprint of the public JWK).
public struct SigningKey: Sendable, Hashable {
    public let algorithm: SigningAlgorithm
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

public enum SigningKeyError: Error, Equatable {
    case corrupt
    /// No key has been loaded into the key ring yet.
    case noActiveKey
}

/// Unpadded base64url (RFC 4648 §5), written directly: Foundation's base64 plus three
/// `replacingOccurrences` calls cost several microseconds per token on Linux.
public enum Base64URL {
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// Appends the encoding of `data` to `out` (ASCII bytes).
    public static func append(_ data: some DataProtocol, to out: inout [UInt8]) {
        if let done: Void = data.withContiguousStorageIfAvailable({ append($0, to: &out) }) { return done }
        Array(data).withUnsafeBufferPointer { append($0, to: &out) }
    }

    /// Writes into `out`'s storage once, grown to the encoded size (appending byte by byte
    /// checked uniqueness and capacity for every byte: 1.6 % of the token server's thread).
    static func append(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        let count = bytes.count
        let tail = count % 3
        let encodedCount = count / 3 * 4 + (tail == 0 ? 0 : tail + 1)
        guard encodedCount > 0 else { return }
        var j = out.count
        out.append(contentsOf: repeatElement(0, count: encodedCount))
        out.withUnsafeMutableBufferPointer { o in
            alphabet.withUnsafeBufferPointer { a in
                var i = 0
                while i + 3 <= count {
                    let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                    o[j] = a[Int(v >> 18)]
                    o[j + 1] = a[Int((v >> 12) & 63)]
                    o[j + 2] = a[Int((v >> 6) & 63)]
                    o[j + 3] = a[Int(v & 63)]
                    i += 3
                    j += 4
                }
                switch tail {
                case 1:
                    let v = UInt32(bytes[i]) << 16
                    o[j] = a[Int(v >> 18)]
                    o[j + 1] = a[Int((v >> 12) & 63)]
                case 2:
                    let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
                    o[j] = a[Int(v >> 18)]
                    o[j + 1] = a[Int((v >> 12) & 63)]
                    o[j + 2] = a[Int((v >> 6) & 63)]
                default: break
                }
            }
        }
    }

    public static func encode(_ data: some DataProtocol) -> String {
        var out: [UInt8] = []
        append(data, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Strict: only the base64url alphabet, no padding, no whitespace; a length of 4n+1 or
    /// non-zero trailing bits are refused, so each byte string has exactly one encoding.
    public static func decode(_ text: some StringProtocol) -> Data? {
        let input = Array(text.utf8)
        let count = input.count
        let rest = count % 4
        if rest == 1 { return nil }
        var out = [UInt8]()
        out.reserveCapacity(count * 3 / 4)
        var i = 0
        func value(_ byte: UInt8) -> UInt32? {
            let v = values[Int(byte)]
            return v == 0xFF ? nil : UInt32(v)
        }
        while i + 4 <= count {
            guard let a = value(input[i]), let b = value(input[i + 1]), let c = value(input[i + 2]), let d = value(input[i + 3]) else { return nil }
            let v = a << 18 | b << 12 | c << 6 | d
            out.append(UInt8(v >> 16))
            out.append(UInt8((v >> 8) & 0xFF))
            out.append(UInt8(v & 0xFF))
            i += 4
        }
        if rest == 2 {
            guard let a = value(input[i]), let b = value(input[i + 1]), b & 0x0F == 0 else { return nil }
            out.append(UInt8((a << 18 | b << 12) >> 16))
        } else if rest == 3 {
            guard let a = value(input[i]), let b = value(input[i + 1]), let c = value(input[i + 2]), c & 0x03 == 0 else { return nil }
            let v = a << 18 | b << 12 | c << 6
            out.append(UInt8(v >> 16))
            out.append(UInt8((v >> 8) & 0xFF))
        }
        return Data(out)
    }
}
