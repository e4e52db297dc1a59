import Foundation

// Wire messages of the token service (proto/token.proto). `token.issueSession` and its
// messages are in ServiceContracts.swift, shared with the identity service.

/// `token.refresh` request.
public struct RefreshRequest: Codable, Sendable, Hashable {
    public var refreshToken: String
    public var client: ClientInfo
    public init(refreshToken: String, client: ClientInfo = ClientInfo()) {
        self.refreshToken = refreshToken
        self.client = client
    }
    enum CodingKeys: Int, CodingKey {
        case refreshToken = 1
        case client = 2
    }
}

/// `token.revokeSession` request.
public struct RevokeSessionRequest: Codable, Sendable, Hashable {
    public var sessionID: String
    /// Why (`sign_out`, `admin`, ...); stored with the session.
    public var reason: String
    public init(sessionID: String, reason: String = "sign_out") {
        self.sessionID = sessionID
        self.reason = reason
    }
    enum CodingKeys: Int, CodingKey {
        case sessionID = 1
        case reason = 2
    }
}

/// `token.revokeAllSessions` / `token.listSessions` request.
public struct UserSessionsRequest: Codable, Sendable, Hashable {
    public var userID: String
    public var reason: String
    public init(userID: String, reason: String = "sign_out_everywhere") {
        self.userID = userID
        self.reason = reason
    }
    enum CodingKeys: Int, CodingKey {
        case userID = 1
        case reason = 2
    }
}

/// How many sessions a call revoked.
public struct RevokedCount: Codable, Sendable, Hashable {
    public var count: Int64
    public init(count: Int64) { self.count = count }
    enum CodingKeys: Int, CodingKey { case count = 1 }
}

/// A session as listed to its user.
public struct SessionInfo: Codable, Sendable, Hashable {
    public var sessionID: String
    public var userID: String
    public var createdAt: Date
    public var authTime: Date
    public var lastUsedAt: Date
    public var expiresAt: Date
    public var amr: [String]
    public var client: ClientInfo
    public var revokedAt: Date?
    public var revokeReason: String

    public init(
        sessionID: String, userID: String, createdAt: Date, authTime: Date, lastUsedAt: Date, expiresAt: Date,
        amr: [String], client: ClientInfo, revokedAt: Date?, revokeReason: String
    ) {
        self.sessionID = sessionID
        self.userID = userID
        self.createdAt = createdAt
        self.authTime = authTime
        self.lastUsedAt = lastUsedAt
        self.expiresAt = expiresAt
        self.amr = amr
        self.client = client
        self.revokedAt = revokedAt
        self.revokeReason = revokeReason
    }

    enum CodingKeys: Int, CodingKey {
        case sessionID = 1, userID = 2, createdAt = 3, authTime = 4, lastUsedAt = 5, expiresAt = 6
        case amr = 7, client = 8, revokedAt = 9, revokeReason = 10
    }
}

/// `token.listSessions` reply.
public struct SessionList: Codable, Sendable, Hashable {
    public var sessions: [SessionInfo]
    public init(sessions: [SessionInfo]) { self.sessions = sessions }
    enum CodingKeys: Int, CodingKey { case sessions = 1 }
}

/// `token.verifyAccessToken` request.
public struct VerifyRequest: Codable, Sendable, Hashable {
    public var token: String
    /// Also refuse tokens of sessions revoked since they were minted.
    public var checkRevoked: Bool
    public init(token: String, checkRevoked: Bool = true) {
        self.token = token
        self.checkRevoked = checkRevoked
    }
    enum CodingKeys: Int, CodingKey {
        case token = 1
        case checkRevoked = 2
    }
}

/// The verified claims of an access token.
public struct VerifiedClaims: Codable, Sendable, Hashable {
    public var subject: String
    public var sessionID: String
    public var issuedAt: Date
    public var expiresAt: Date
    public var authTime: Date
    public var amr: [String]
    public var email: String
    public var emailVerified: Bool
    public var isAnonymous: Bool
    public var tokenID: String
    /// Custom claims as a JSON object ("" when none).
    public var customClaimsJSON: String

    public init(
        subject: String, sessionID: String, issuedAt: Date, expiresAt: Date, authTime: Date, amr: [String],
        email: String, emailVerified: Bool, isAnonymous: Bool, tokenID: String, customClaimsJSON: String
    ) {
        self.subject = subject
        self.sessionID = sessionID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.authTime = authTime
        self.amr = amr
        self.email = email
        self.emailVerified = emailVerified
        self.isAnonymous = isAnonymous
        self.tokenID = tokenID
        self.customClaimsJSON = customClaimsJSON
    }

    enum CodingKeys: Int, CodingKey {
        case subject = 1, sessionID = 2, issuedAt = 3, expiresAt = 4, authTime = 5, amr = 6
        case email = 7, emailVerified = 8, isAnonymous = 9, tokenID = 10, customClaimsJSON = 11
    }
}

/// `token.jwks` reply: the JWKS document (RFC 7517) as JSON.
public struct JWKSDocument: Codable, Sendable, Hashable {
    public var json: String
    public init(json: String) { self.json = json }
    enum CodingKeys: Int, CodingKey { case json = 1 }
}

/// `token.rotateKeys` reply.
public struct RotateKeysResponse: Codable, Sendable, Hashable {
    /// The new signing key's id.
    public var kid: String
    /// The previous key's id, published until `previousRetiresAt`.
    public var previousKid: String
    public var previousRetiresAt: Date?
    public init(kid: String, previousKid: String, previousRetiresAt: Date?) {
        self.kid = kid
        self.previousKid = previousKid
        self.previousRetiresAt = previousRetiresAt
    }
    enum CodingKeys: Int, CodingKey {
        case kid = 1
        case previousKid = 2
        case previousRetiresAt = 3
    }
}

/// Published on `session.revoked`.
public struct SessionRevokedEvent: Codable, Sendable, Hashable {
    public var sessionID: String
    public var userID: String
    public var reason: String
    public var revokedAt: Date
    public init(sessionID: String, userID: String, reason: String, revokedAt: Date) {
        self.sessionID = sessionID
        self.userID = userID
        self.reason = reason
        self.revokedAt = revokedAt
    }
    enum CodingKeys: Int, CodingKey {
        case sessionID = 1, userID = 2, reason = 3, revokedAt = 4
    }
}

/// The token service's methods.
public enum TokenAPI {
    public static let issueSession = ServiceContracts.issueSession
    public static let refresh = RPCMethod<RefreshRequest, SessionTokens>(name: "token.refresh")
    public static let revokeSession = RPCMethod<RevokeSessionRequest, RevokedCount>(name: "token.revokeSession", idempotent: true)
    public static let revokeAllSessions = RPCMethod<UserSessionsRequest, RevokedCount>(name: "token.revokeAllSessions", idempotent: true)
    public static let listSessions = RPCMethod<UserSessionsRequest, SessionList>(name: "token.listSessions", idempotent: true)
    public static let verifyAccessToken = RPCMethod<VerifyRequest, VerifiedClaims>(name: "token.verifyAccessToken", idempotent: true)
    public static let jwks = RPCMethod<Empty, JWKSDocument>(name: "token.jwks", idempotent: true)
    public static let rotateKeys = RPCMethod<Empty, RotateKeysResponse>(name: "token.rotateKeys")

    /// Event topics.
    public enum Topic {
        public static let sessionRevoked = "session.revoked"
    }
}
