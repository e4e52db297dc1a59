import Foundation

// The two calls where the identity and token services meet. Every other method lives with
// its service (`IdentityCore`, `TokenCore`); these two are here because both sides need them.
// Their wire contract is in proto/identity.proto and proto/token.proto.

/// Who is calling, as the gateway saw it. Stored with a session.
public struct ClientInfo: Codable, Sendable, Hashable {
    /// The HTTP `User-Agent`, truncated to 512 bytes by the gateway.
    public var userAgent: String
    /// The client's IP address, textual.
    public var ip: String

    /// Client details as the gateway saw them; "" for what it did not know.
    public init(userAgent: String = "", ip: String = "") {
        self.userAgent = userAgent
        self.ip = ip
    }

    enum CodingKeys: Int, CodingKey {
        case userAgent = 1
        case ip = 2
    }
}

/// What the token service needs to know about a user to mint or refresh a session
/// (`identity.claimsForSession` reply, and part of `token.issueSession`).
public struct UserClaims: Codable, Sendable, Hashable {
    /// False when no user has this id (deleted): the session must be revoked.
    public var exists: Bool
    /// True when the user is disabled: the session must be revoked.
    public var disabled: Bool
    /// The user's email address as typed (trimmed); the `email` claim, left out when "".
    public var email: String
    /// Whether the user proved they own `email`; the `email_verified` claim.
    public var emailVerified: Bool
    /// Whether the user is anonymous (no email address); the `is_anonymous` claim.
    public var isAnonymous: Bool
    /// The user's custom claims as a JSON object (at most 1,000 bytes), or "" for none.
    public var customClaimsJSON: String
    /// Sessions whose `authTime` is before this instant are no longer valid. Nil: no cut-off.
    public var tokensValidAfter: Date?

    /// Claims of an existing, enabled user with no email and no cut-off unless given.
    public init(
        exists: Bool = true, disabled: Bool = false, email: String = "", emailVerified: Bool = false,
        isAnonymous: Bool = false, customClaimsJSON: String = "", tokensValidAfter: Date? = nil
    ) {
        self.exists = exists
        self.disabled = disabled
        self.email = email
        self.emailVerified = emailVerified
        self.isAnonymous = isAnonymous
        self.customClaimsJSON = customClaimsJSON
        self.tokensValidAfter = tokensValidAfter
    }

    enum CodingKeys: Int, CodingKey {
        case exists = 1
        case disabled = 2
        case email = 3
        case emailVerified = 4
        case isAnonymous = 5
        case customClaimsJSON = 6
        case tokensValidAfter = 7
    }
}

/// `identity.claimsForSession` request.
public struct ClaimsForSessionRequest: Codable, Sendable, Hashable {
    /// The session's user; an id that names no user is answered `exists = false`, not an error.
    public var userID: String
    /// A request for the claims of `userID`.
    public init(userID: String) { self.userID = userID }
    enum CodingKeys: Int, CodingKey { case userID = 1 }
}

/// `token.issueSession` request: the identity service has verified the user and asks for a session.
public struct IssueSessionRequest: Codable, Sendable, Hashable {
    /// The user the session is for (1 to 128 bytes): the `sub` claim.
    public var userID: String
    /// The user's claims at issue time.
    public var claims: UserClaims
    /// Authentication methods used (RFC 8176 values, e.g. `pwd`).
    public var amr: [String]
    /// When the user authenticated.
    public var authTime: Date
    /// The client that signed in, stored with the session.
    public var client: ClientInfo

    /// A request for a session of a user who has just authenticated.
    public init(userID: String, claims: UserClaims, amr: [String], authTime: Date, client: ClientInfo) {
        self.userID = userID
        self.claims = claims
        self.amr = amr
        self.authTime = authTime
        self.client = client
    }

    enum CodingKeys: Int, CodingKey {
        case userID = 1
        case claims = 2
        case amr = 3
        case authTime = 4
        case client = 5
    }
}

/// A session's tokens, as returned by `token.issueSession` and `token.refresh`.
public struct SessionTokens: Codable, Sendable, Hashable {
    /// The access token, a JWT signed with the active key, valid for `expiresIn` seconds.
    public var accessToken: String
    /// The opaque refresh token; `token.refresh` exchanges
    /// it for a successor and a new access token.
    public var refreshToken: String
    /// Always `Bearer`.
    public var tokenType: String
    /// Seconds until the access token expires.
    public var expiresIn: Int64
    /// The session id (the `sid` claim).
    public var sessionID: String

    /// A session's tokens; `tokenType` is `Bearer` unless given.
    public init(accessToken: String, refreshToken: String, tokenType: String = "Bearer", expiresIn: Int64, sessionID: String) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.sessionID = sessionID
    }

    enum CodingKeys: Int, CodingKey {
        case accessToken = 1
        case refreshToken = 2
        case tokenType = 3
        case expiresIn = 4
        case sessionID = 5
    }
}

/// Method descriptors for the meeting points of the identity and token services.
public enum ServiceContracts {
    /// identity → token: mint a session for a verified user.
    public static let issueSession = RPCMethod<IssueSessionRequest, SessionTokens>(name: "token.issueSession", callers: [.identity])
    /// token → identity: the user's current claims, asked at every refresh.
    public static let claimsForSession = RPCMethod<ClaimsForSessionRequest, UserClaims>(
        name: "identity.claimsForSession", idempotent: true, callers: [.token])
}
