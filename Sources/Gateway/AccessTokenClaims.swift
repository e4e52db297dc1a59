import Foundation
public import JWTKit

/// The claims of a Gatehouse access token. Time, issuer and audience checks are done by
/// `BearerVerifier` against the gateway's clock and configuration, not here.
public struct AccessTokenClaims: JWTPayload, Sendable, Equatable {
    /// Subject: the user's id; `GET /v1/me` looks this user up.
    public var sub: String
    /// The session id; a token of a session the gateway
    /// has seen revoked (`session.revoked`) is refused.
    public var sid: String
    /// Expiry; past it (plus the leeway) the token is refused as expired.
    public var exp: Date
    /// When the token was minted; a token from the future (past the leeway) is refused.
    public var iat: Date
    /// Not before: a token before it (past the leeway) is refused; Gatehouse's tokens have none.
    public var nbf: Date?
    /// Issuer; must be the configured `issuer`.
    public var iss: String
    /// Audiences (a single string in the token reads as
    /// one); must include the configured `audience`.
    public var aud: [String]
    /// The token's unique id.
    public var jti: String
    /// The user's email address, when the user has one.
    public var email: String?
    /// `email_verified`, when present.
    public var emailVerified: Bool?
    /// `is_anonymous`, when present.
    public var isAnonymous: Bool?
    /// Authentication methods used (RFC 8176 values), when present.
    public var amr: [String]?
    /// `auth_time`: when the user authenticated for the session, when present.
    public var authTime: Date?

    enum CodingKeys: String, CodingKey {
        case sub, sid, exp, iat, nbf, iss, aud, jti, email, amr
        case emailVerified = "email_verified"
        case isAnonymous = "is_anonymous"
        case authTime = "auth_time"
    }

    /// Claims as given; the optional ones default to absent (tests mint tokens with it).
    public init(
        sub: String, sid: String, exp: Date, iat: Date, nbf: Date? = nil, iss: String, aud: [String], jti: String,
        email: String? = nil, emailVerified: Bool? = nil, isAnonymous: Bool? = nil, amr: [String]? = nil, authTime: Date? = nil
    ) {
        self.sub = sub
        self.sid = sid
        self.exp = exp
        self.iat = iat
        self.nbf = nbf
        self.iss = iss
        self.aud = aud
        self.jti = jti
        self.email = email
        self.emailVerified = emailVerified
        self.isAnonymous = isAnonymous
        self.amr = amr
        self.authTime = authTime
    }

    /// Reads a payload; times are seconds since 1970, `aud` a string or an array.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        sub = try c.decode(String.self, forKey: .sub)
        sid = try c.decode(String.self, forKey: .sid)
        exp = Date(timeIntervalSince1970: try c.decode(Double.self, forKey: .exp))
        iat = Date(timeIntervalSince1970: try c.decode(Double.self, forKey: .iat))
        nbf = try c.decodeIfPresent(Double.self, forKey: .nbf).map(Date.init(timeIntervalSince1970:))
        iss = try c.decode(String.self, forKey: .iss)
        if let one = try? c.decode(String.self, forKey: .aud) {
            aud = [one]
        } else {
            aud = try c.decode([String].self, forKey: .aud)
        }
        jti = try c.decode(String.self, forKey: .jti)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        emailVerified = try c.decodeIfPresent(Bool.self, forKey: .emailVerified)
        isAnonymous = try c.decodeIfPresent(Bool.self, forKey: .isAnonymous)
        amr = try c.decodeIfPresent([String].self, forKey: .amr)
        authTime = try c.decodeIfPresent(Double.self, forKey: .authTime).map(Date.init(timeIntervalSince1970:))
    }

    /// Writes a payload: times as whole seconds, a single audience as a string.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(sub, forKey: .sub)
        try c.encode(sid, forKey: .sid)
        try c.encode(Int64(exp.timeIntervalSince1970), forKey: .exp)
        try c.encode(Int64(iat.timeIntervalSince1970), forKey: .iat)
        try c.encodeIfPresent(nbf.map { Int64($0.timeIntervalSince1970) }, forKey: .nbf)
        try c.encode(iss, forKey: .iss)
        if aud.count == 1 { try c.encode(aud[0], forKey: .aud) } else { try c.encode(aud, forKey: .aud) }
        try c.encode(jti, forKey: .jti)
        try c.encodeIfPresent(email, forKey: .email)
        try c.encodeIfPresent(emailVerified, forKey: .emailVerified)
        try c.encodeIfPresent(isAnonymous, forKey: .isAnonymous)
        try c.encodeIfPresent(amr, forKey: .amr)
        try c.encodeIfPresent(authTime.map { Int64($0.timeIntervalSince1970) }, forKey: .authTime)
    }

    /// Signature is checked by jwt-kit; claims are checked by `BearerVerifier`.
    public func verify(using algorithm: some JWTAlgorithm) throws {}
}
