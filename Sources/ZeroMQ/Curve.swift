import CZeroMQ

/// A CURVE key pair (Curve25519), as raw 32-byte keys with their Z85 text forms.
public struct CurveKeyPair: Sendable, Hashable {
    /// The 32-byte public key: peers know it (a server's clients must, to connect).
    public let publicKey: [UInt8]
    /// The 32-byte secret key: it proves, in the handshake, that this side owns `publicKey`.
    public let secretKey: [UInt8]

    /// A pair from raw keys, as given (not checked against each other).
    public init(publicKey: [UInt8], secretKey: [UInt8]) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// A fresh random key pair (libzmq's `zmq_curve_keypair`, backed by libsodium).
    public static func generate() throws -> CurveKeyPair {
        var pub = [CChar](repeating: 0, count: 41)
        var sec = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&pub, &sec) == 0 else { throw ZMQError.last("zmq_curve_keypair") }
        let pubText = String(decoding: pub.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let secText = String(decoding: sec.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let p = Z85.decode(pubText), let s = Z85.decode(secText) else {
            throw ZMQError(code: EINVAL, operation: "zmq_curve_keypair returned invalid Z85")
        }
        return CurveKeyPair(publicKey: p, secretKey: s)
    }

    /// The key pair of `secretKey` (32 bytes): the public key is derived with libzmq's
    /// `zmq_curve_public`. Throws when the key does not have 32 bytes.
    public init(secretKey: [UInt8]) throws {
        guard secretKey.count == 32, let secretText = Z85.encode(secretKey) else {
            throw ZMQError(code: EINVAL, operation: "a CURVE secret key has 32 bytes, not \(secretKey.count)")
        }
        var pub = [CChar](repeating: 0, count: 41)
        let rc = secretText.withCString { zmq_curve_public(&pub, $0) }
        guard rc == 0 else { throw ZMQError.last("zmq_curve_public") }
        let pubText = String(decoding: pub.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let publicKey = Z85.decode(pubText) else {
            throw ZMQError(code: EINVAL, operation: "zmq_curve_public returned invalid Z85")
        }
        self.init(publicKey: publicKey, secretKey: secretKey)
    }

    /// The public key in Z85 (40 characters).
    public var publicKeyZ85: String { Z85.encode(publicKey) ?? "" }
    /// The secret key in Z85 (40 characters).
    public var secretKeyZ85: String { Z85.encode(secretKey) ?? "" }
}

/// ZeroMQ's Z85 text encoding (RFC 32/Z85), used for CURVE keys in configuration.
public enum Z85 {
    /// Encodes bytes whose count is a multiple of 4; `nil` otherwise.
    public static func encode(_ bytes: [UInt8]) -> String? {
        guard bytes.count % 4 == 0 else { return nil }
        var out = [CChar](repeating: 0, count: bytes.count * 5 / 4 + 1)
        guard zmq_z85_encode(&out, bytes, bytes.count) != nil else { return nil }
        return String(decoding: out.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Decodes a 32-byte CURVE key from its 40-character Z85 form; `nil` for anything else.
    public static func decodeKey(_ text: String) -> [UInt8]? {
        guard text.utf8.count == 40, let key = decode(text), key.count == 32 else { return nil }
        return key
    }

    /// Decodes Z85 text whose length is a multiple of 5; `nil` when it is not valid Z85.
    public static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 5 == 0, !utf8.isEmpty else { return nil }
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)
        guard utf8.allSatisfy({ alphabet.contains($0) }) else { return nil }
        var out = [UInt8](repeating: 0, count: utf8.count * 4 / 5)
        let ok = text.withCString { zmq_z85_decode(&out, $0) != nil }
        return ok ? out : nil
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
