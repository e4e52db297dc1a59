import Foundation
import JWTKit
import GatehouseSupport

/// A JSON value, for custom claims.
public enum JSONValue: Codable, Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Reads any JSON value (a number always as `Double`).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    /// Writes the value as JSON; a whole number below 9e15 is written without a fraction.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n):
            if n.rounded() == n, abs(n) < 9.0e15 { try c.encode(Int64(n)) } else { try c.encode(n) }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}

/// The claims of a Gatehouse access token.
public struct AccessClaims: JWTPayload, Hashable {
    /// Claim names custom claims may not use.
    public static let reservedNames: Set<String> = [
        "iss", "aud", "sub", "iat", "exp", "nbf", "jti", "sid", "auth_time", "amr", "email", "email_verified",
        "is_anonymous", "azp", "acr", "nonce", "at_hash", "c_hash", "cnf", "scope", "client_id", "typ",
    ]

    /// Issuer: the token service's configured issuer (by default the public URL).
    public var iss: String
    /// Audience: the configured audience (one string; an array of one is accepted when read).
    public var aud: String
    /// Subject: the user's id.
    public var sub: String
    /// Issued at, in seconds since 1970.
    public var iat: Int64
    /// Expires at, in seconds since 1970.
    public var exp: Int64
    /// Not before, in seconds since 1970; nil in the tokens Gatehouse mints, checked when present.
    public var nbf: Int64?
    /// The token's unique id.
    public var jti: String
    /// The session the token belongs to; refresh and revocation act on it.
    public var sid: String
    /// `auth_time`: when the user authenticated for the session, in seconds since 1970.
    public var authTime: Int64
    /// Authentication methods used (RFC 8176 values, e.g. `pwd`).
    public var amr: [String]
    /// The user's email address; nil (and left out of the token) when the user has none.
    public var email: String?
    /// `email_verified`: whether the user proved they own `email`.
    public var emailVerified: Bool
    /// `is_anonymous`: whether the user is anonymous.
    public var isAnonymous: Bool
    /// The user's custom claims, top-level members of the
    /// payload; reserved names are never written or read here.
    public var custom: [String: JSONValue]

    /// The claims of a token to mint (no `nbf`).
    public init(
        iss: String, aud: String, sub: String, iat: Int64, exp: Int64, jti: String, sid: String, authTime: Int64,
        amr: [String], email: String?, emailVerified: Bool, isAnonymous: Bool, custom: [String: JSONValue] = [:]
    ) {
        self.iss = iss
        self.aud = aud
        self.sub = sub
        self.iat = iat
        self.exp = exp
        self.nbf = nil
        self.jti = jti
        self.sid = sid
        self.authTime = authTime
        self.amr = amr
        self.email = email
        self.emailVerified = emailVerified
        self.isAnonymous = isAnonymous
        self.custom = custom
    }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Reads a payload: the registered claims by name, every member not reserved into `custom`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        iss = try c.decode(String.self, forKey: Key("iss"))
        // `aud` may be a string or an array of strings (RFC 7519); we mint a string.
        if let single = try? c.decode(String.self, forKey: Key("aud")) {
            aud = single
        } else {
            let many = try c.decode([String].self, forKey: Key("aud"))
            guard many.count == 1 else {
                throw DecodingError.dataCorruptedError(forKey: Key("aud"), in: c, debugDescription: "one audience expected")
            }
            aud = many[0]
        }
        sub = try c.decode(String.self, forKey: Key("sub"))
        iat = try c.decode(Int64.self, forKey: Key("iat"))
        exp = try c.decode(Int64.self, forKey: Key("exp"))
        nbf = try c.decodeIfPresent(Int64.self, forKey: Key("nbf"))
        jti = try c.decode(String.self, forKey: Key("jti"))
        sid = try c.decode(String.self, forKey: Key("sid"))
        authTime = try c.decode(Int64.self, forKey: Key("auth_time"))
        amr = try c.decodeIfPresent([String].self, forKey: Key("amr")) ?? []
        email = try c.decodeIfPresent(String.self, forKey: Key("email"))
        emailVerified = try c.decodeIfPresent(Bool.self, forKey: Key("email_verified")) ?? false
        isAnonymous = try c.decodeIfPresent(Bool.self, forKey: Key("is_anonymous")) ?? false
        var custom: [String: JSONValue] = [:]
        for key in c.allKeys where !Self.reservedNames.contains(key.stringValue) {
            custom[key.stringValue] = try c.decode(JSONValue.self, forKey: key)
        }
        self.custom = custom
    }

    /// Writes the payload member for member as `jsonBytes()` does (`write(to:)`).
    public func encode(to encoder: any Encoder) throws {
        var writer = ContainerClaimsWriter(container: encoder.container(keyedBy: Key.self))
        try write(to: &writer)
    }

    /// Hands the payload's members to `writer` in the order a token carries them: the registered
    /// claims (`nbf` and `email` only when set), then the custom claims in name order, reserved
    /// names left out.
    func write(to writer: inout some ClaimsWriter) throws {
        try writer.string("iss", iss)
        try writer.string("aud", aud)
        try writer.string("sub", sub)
        try writer.int("iat", Int(iat))
        try writer.int("exp", Int(exp))
        if let nbf { try writer.int("nbf", Int(nbf)) }
        try writer.string("jti", jti)
        try writer.string("sid", sid)
        try writer.int("auth_time", Int(authTime))
        try writer.strings("amr", amr)
        if let email { try writer.string("email", email) }
        try writer.bool("email_verified", emailVerified)
        try writer.bool("is_anonymous", isAnonymous)
        for (name, value) in custom.sorted(by: { $0.key < $1.key }) where !Self.reservedNames.contains(name) {
            try writer.custom(name, value)
        }
    }

    /// Signature checks are done by the caller (`TokenVerifier`), which also checks the time
    /// claims against an injected clock.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}

    /// Parses a custom-claims JSON object, refusing reserved names, non-objects and more than
    /// 1,000 bytes.
    public static func parseCustomClaims(_ json: String) throws -> [String: JSONValue] {
        if json.isEmpty { return [:] }
        guard json.utf8.count <= 1000 else { throw CustomClaimsError.tooLarge }
        guard case .object(let object) = try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8)) else {
            throw CustomClaimsError.notAnObject
        }
        if let reserved = object.keys.first(where: { reservedNames.contains($0) }) {
            throw CustomClaimsError.reservedName(reserved)
        }
        return object
    }
}

/// Why custom claims were refused.
public enum CustomClaimsError: Error, Equatable {
    case tooLarge
    case notAnObject
    case reservedName(String)
}

extension AccessClaims {
    /// The payload JSON, member for member as `encode(to:)` writes it, without `JSONEncoder`
    /// (which was several percent of a refresh's CPU time). Custom claims, rare, still go
    /// through `JSONEncoder` one value at a time.
    public func jsonBytes() throws -> [UInt8] {
        var writer = JSONObjectWriter()
        try write(to: &writer)
        return writer.finish()
    }
}

/// Where `AccessClaims.write(to:)` puts the payload's members: the JSON bytes of a token to sign
/// (`JSONObjectWriter`), or an encoder's container (`encode(to:)`).
protocol ClaimsWriter {
    mutating func string(_ name: String, _ value: String?) throws
    mutating func int(_ name: String, _ value: Int) throws
    mutating func bool(_ name: String, _ value: Bool) throws
    mutating func strings(_ name: String, _ values: [String]) throws
    mutating func custom(_ name: String, _ value: JSONValue) throws
}

extension JSONObjectWriter: ClaimsWriter {
    mutating func custom(_ name: String, _ value: JSONValue) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        raw(name, try encoder.encode(value))
    }
}

/// `AccessClaims.encode(to:)`'s writer: each member into the encoder's keyed container.
struct ContainerClaimsWriter: ClaimsWriter {
    var container: KeyedEncodingContainer<AccessClaims.Key>
    mutating func string(_ name: String, _ value: String?) throws { try container.encode(value, forKey: .init(name)) }
    mutating func int(_ name: String, _ value: Int) throws { try container.encode(value, forKey: .init(name)) }
    mutating func bool(_ name: String, _ value: Bool) throws { try container.encode(value, forKey: .init(name)) }
    mutating func strings(_ name: String, _ values: [String]) throws { try container.encode(values, forKey: .init(name)) }
    mutating func custom(_ name: String, _ value: JSONValue) throws { try container.encode(value, forKey: .init(name)) }
}
