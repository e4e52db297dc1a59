import Foundation

/// The claims of an ID token that passed every check of `IDTokenVerifier`.
public struct VerifiedProviderToken: Sendable, Equatable {
    /// The configured name of the provider that issued it (`apple`, `google`, …).
    public let provider: String
    /// `sub`: the user's stable id at the provider (with `provider`, the identity to link).
    public let sub: String
    /// `email`, when the token has one (for Apple, possibly a private relay address: a normal email).
    public let email: String?
    /// `email_verified`, read from a boolean or from the strings `"true"`/`"false"` (Apple sends
    /// either); false when absent or unreadable. An unverified address must never link to an
    /// existing account by email.
    public let emailVerified: Bool
    /// `is_private_email` (Apple's relay addresses), read like `emailVerified`; false when absent.
    public let isPrivateEmail: Bool
    /// `iss`.
    public let iss: String
    /// `aud`, always as a list (a single string becomes one element).
    public let aud: [String]
    /// `exp`.
    public let exp: Date
    /// `iat`.
    public let iat: Date
    /// `nonce` as the token carries it (Apple: the SHA-256 hex of the raw nonce).
    public let nonce: String?
    /// `jti`, when the token has one.
    public let jti: String?
    /// The key the verifier's replay guard remembers the token by (provider, issuer, and `jti` or
    /// the token's SHA-256), for a guard shared by several instances (`SharedReplayGuard`).
    public var replayID = ""
    /// Until when the token is accepted (its `exp` plus the allowed skew): how long a shared
    /// replay guard must remember it.
    public var replayUntil = Date.distantPast
}

/// The JOSE header fields the verifier reads.
struct IDTokenHeader: Decodable {
    var alg: String?
    var kid: String?
    var crit: [String]?

    enum CodingKeys: String, CodingKey {
        case alg, kid, crit
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        alg = try? container.decodeIfPresent(String.self, forKey: .alg)
        kid = try? container.decodeIfPresent(String.self, forKey: .kid)
        crit = try? container.decodeIfPresent([String].self, forKey: .crit)
    }
}

/// The claims the verifier reads; a claim of the wrong type reads as absent.
struct IDTokenPayload: Decodable {
    var iss: String?
    var sub: String?
    var aud: [String]?
    var exp: Double?
    var iat: Double?
    var nonce: String?
    var jti: String?
    var email: String?
    var emailVerified: Bool?
    var isPrivateEmail: Bool?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nonce, jti, email
        case emailVerified = "email_verified"
        case isPrivateEmail = "is_private_email"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        iss = try? container.decodeIfPresent(String.self, forKey: .iss)
        sub = try? container.decodeIfPresent(String.self, forKey: .sub)
        if let single = try? container.decodeIfPresent(String.self, forKey: .aud) {
            aud = [single]
        } else {
            aud = try? container.decodeIfPresent([String].self, forKey: .aud)
        }
        exp = ClaimReading.number(container, .exp)
        iat = ClaimReading.number(container, .iat)
        nonce = try? container.decodeIfPresent(String.self, forKey: .nonce)
        jti = try? container.decodeIfPresent(String.self, forKey: .jti)
        email = try? container.decodeIfPresent(String.self, forKey: .email)
        emailVerified = ClaimReading.flag(container, .emailVerified)
        isPrivateEmail = ClaimReading.flag(container, .isPrivateEmail)
    }
}

/// Reading claims whose providers are loose about types.
enum ClaimReading {
    /// A JSON number (never a boolean or a string), finite.
    static func number<Key: CodingKey>(_ container: KeyedDecodingContainer<Key>, _ key: Key) -> Double? {
        if (try? container.decodeIfPresent(Bool.self, forKey: key)) != nil { return nil }
        guard let value = try? container.decodeIfPresent(Double.self, forKey: key), value.isFinite else { return nil }
        return value
    }

    /// A boolean, or the string `"true"`/`"false"` (any case), as Apple may send it.
    static func flag<Key: CodingKey>(_ container: KeyedDecodingContainer<Key>, _ key: Key) -> Bool? {
        if let value = try? container.decodeIfPresent(Bool.self, forKey: key) { return value }
        let text = try? container.decodeIfPresent(String.self, forKey: key)
        switch text?.lowercased() ?? "" {
        case "true": return true
        case "false": return false
        default: return nil
        }
    }
}
