import Foundation

// Wire messages of the token service (proto/token.proto). `token.issueSession` and its
// messages are in ServiceContracts.swift, shared with the identity service.

/// `token.refresh` request.
public struct RefreshRequest: Codable, Sendable, Hashable {
    /// The refresh token to exchange: the session's latest
    /// (or, within the grace window, the one before).
    public var refreshToken: String
    /// The client refreshing.
    public var client: ClientInfo
    /// A refresh of `refreshToken`, from an unknown client unless `client` is given.
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
    /// The session to revoke (1 to 64 bytes); an unknown
    /// or already revoked one is left alone (count 0).
    public var sessionID: String
    /// Why (`sign_out`, `admin`, ...); stored with the session.
    public var reason: String
    /// A revocation of `sessionID`, for `reason` (a sign-out unless given).
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
    /// The user whose sessions are meant.
    public var userID: String
    /// Why the sessions are revoked, stored with each
    /// (`token.revokeAllSessions` only; "": `sign_out_everywhere`).
    public var reason: String
    /// A session `token.revokeAllSessions` leaves alone (the caller's own, after a password
    /// change); nil: none.
    public var exceptSessionID: String?
    /// A request about `userID`'s sessions; `reason` and `exceptSessionID` matter only to
    /// `token.revokeAllSessions`.
    public init(userID: String, reason: String = "sign_out_everywhere", exceptSessionID: String? = nil) {
        self.userID = userID
        self.reason = reason
        self.exceptSessionID = exceptSessionID
    }
    enum CodingKeys: Int, CodingKey {
        case userID = 1
        case reason = 2
        case exceptSessionID = 3
    }
}

/// How many sessions a call revoked, and which. The revocations are committed to the token
/// database before this reply is sent.
public struct RevokedCount: Codable, Sendable, Hashable {
    /// Sessions this call revoked; 0 when none was left unrevoked.
    public var count: Int64
    /// The ids of the sessions this call revoked, so the caller can refuse their access tokens at
    /// once, before any event arrives; `token.revokeAllSessions` also names the user's sessions
    /// revoked earlier whose tokens may still be valid (a retried call still names them all).
    public var sessionIDs: [String]
    /// A count of revoked sessions, with their ids.
    public init(count: Int64, sessionIDs: [String] = []) {
        self.count = count
        self.sessionIDs = sessionIDs
    }
    enum CodingKeys: Int, CodingKey {
        case count = 1
        case sessionIDs = 2
    }
}

/// A session as listed to its user.
public struct SessionInfo: Codable, Sendable, Hashable {
    /// The session's id (the `sid` claim of its access tokens).
    public var sessionID: String
    /// The user the session is for.
    public var userID: String
    /// When the session was issued.
    public var createdAt: Date
    /// When the user authenticated for it (the `auth_time` claim).
    public var authTime: Date
    /// When the current refresh token was made (issue or
    /// last refresh); the idle timeout counts from it.
    public var lastUsedAt: Date
    /// The end of the session's absolute lifetime.
    public var expiresAt: Date
    /// Authentication methods used (RFC 8176 values, e.g. `pwd`).
    public var amr: [String]
    /// The client that signed in, as stored at issue.
    public var client: ClientInfo
    /// When the session was revoked; nil while it is not.
    public var revokedAt: Date?
    /// Why it was revoked (`sign_out`, `refresh_token_reused`,
    /// `user_disabled`, ...); "" while it is not.
    public var revokeReason: String

    /// A listed session, every field given.
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
    /// The user's sessions, revoked and expired ones included, oldest first.
    public var sessions: [SessionInfo]
    /// A list of `sessions`.
    public init(sessions: [SessionInfo]) { self.sessions = sessions }
    enum CodingKeys: Int, CodingKey { case sessions = 1 }
}

/// `token.verifyAccessToken` request.
public struct VerifyRequest: Codable, Sendable, Hashable {
    /// The access token (compact JWT) to verify.
    public var token: String
    /// Also refuse tokens of sessions revoked since they were minted.
    public var checkRevoked: Bool
    /// A verification of `token`, checking revocation unless told not to.
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
    /// The user the token is for (`sub`).
    public var subject: String
    /// The session the token belongs to (`sid`).
    public var sessionID: String
    /// When the token was minted (`iat`).
    public var issuedAt: Date
    /// When the token expires (`exp`).
    public var expiresAt: Date
    /// When the user authenticated for the session (`auth_time`).
    public var authTime: Date
    /// Authentication methods used (`amr`).
    public var amr: [String]
    /// The user's email address at minting; "" when the token has none.
    public var email: String
    /// The `email_verified` claim.
    public var emailVerified: Bool
    /// The `is_anonymous` claim.
    public var isAnonymous: Bool
    /// The token's unique id (`jti`).
    public var tokenID: String
    /// Custom claims as a JSON object ("" when none).
    public var customClaimsJSON: String

    /// Verified claims, every field given.
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
    /// The JWKS document (`{"keys": [...]}`) of every published public key.
    public var json: String
    /// A reply carrying `json`.
    public init(json: String) { self.json = json }
    enum CodingKeys: Int, CodingKey { case json = 1 }
}

/// `token.rotateKeys` request: who asks, for the token service's audit log.
public struct RotateKeysRequest: Codable, Sendable, Hashable {
    /// The audit actor: `admin_key:<id>` from the admin API (through the identity service); ""
    /// for the operator (a tool with the token service's own key). An empty message is a
    /// request of the operator, so callers of the former `Empty` request keep working.
    public var actor: String
    /// A rotation asked for by `actor` ("": the operator).
    public init(actor: String = "") { self.actor = actor }
    enum CodingKeys: Int, CodingKey { case actor = 1 }
}

/// `token.rotateKeys` reply.
public struct RotateKeysResponse: Codable, Sendable, Hashable {
    /// The new signing key's id.
    public var kid: String
    /// The previous key's id, published until `previousRetiresAt`.
    public var previousKid: String
    /// When the previous key's last token has expired (plus leeway) and it stops being published.
    public var previousRetiresAt: Date?
    /// When the new key starts signing (published from now on; later than now with several
    /// instances on one database, so that every instance publishes it first).
    public var activatesAt: Date?
    /// The ids of every key published after the rotation (the new one included), sorted.
    public var publishedKids: [String]
    /// A rotation's outcome.
    public init(kid: String, previousKid: String, previousRetiresAt: Date?, activatesAt: Date? = nil, publishedKids: [String] = []) {
        self.kid = kid
        self.previousKid = previousKid
        self.previousRetiresAt = previousRetiresAt
        self.activatesAt = activatesAt
        self.publishedKids = publishedKids
    }
    enum CodingKeys: Int, CodingKey {
        case kid = 1
        case previousKid = 2
        case previousRetiresAt = 3
        case activatesAt = 4
        case publishedKids = 5
    }
}

/// Published on `session.revoked`.
public struct SessionRevokedEvent: Codable, Sendable, Hashable {
    /// The revoked session.
    public var sessionID: String
    /// The session's user.
    public var userID: String
    /// Why it was revoked (as in `SessionInfo.revokeReason`).
    public var reason: String
    /// When it was revoked.
    public var revokedAt: Date
    /// The publisher's epoch: random, new at each start of the token service.
    public var epoch: String
    /// The event's number within `epoch`: 1 for the first, one more for each next (no gaps).
    public var seq: UInt64
    /// The event for one revoked session, number `seq` of `epoch`.
    public init(sessionID: String, userID: String, reason: String, revokedAt: Date, epoch: String = "", seq: UInt64 = 0) {
        self.sessionID = sessionID
        self.userID = userID
        self.reason = reason
        self.revokedAt = revokedAt
        self.epoch = epoch
        self.seq = seq
    }
    enum CodingKeys: Int, CodingKey {
        case sessionID = 1, userID = 2, reason = 3, revokedAt = 4, epoch = 5, seq = 6
    }
}

/// Published on `token.heartbeat` about once a second: where the revocation feed is, so a
/// subscriber that missed events, or whose publisher restarted, notices within one beat.
public struct RevocationHeartbeat: Codable, Sendable, Hashable {
    /// The publisher's epoch (as in `SessionRevokedEvent.epoch`).
    public var epoch: String
    /// The number of the last `session.revoked` event of `epoch` (0: none yet).
    public var seq: UInt64
    /// A heartbeat at `seq` of `epoch`.
    public init(epoch: String, seq: UInt64) {
        self.epoch = epoch
        self.seq = seq
    }
    enum CodingKeys: Int, CodingKey {
        case epoch = 1, seq = 2
    }
}

/// One revoked session in a `RevocationSnapshot`.
public struct RevokedSession: Codable, Sendable, Hashable {
    /// The revoked session (the `sid` claim of its access tokens).
    public var sessionID: String
    /// When it was revoked.
    public var revokedAt: Date
    /// Session `sessionID`, revoked at `revokedAt`.
    public init(sessionID: String, revokedAt: Date) {
        self.sessionID = sessionID
        self.revokedAt = revokedAt
    }
    enum CodingKeys: Int, CodingKey {
        case sessionID = 1, revokedAt = 2
    }
}

/// `token.listRevocations` reply: every session revoked recently enough that its access tokens
/// may still be valid, and the feed's position when the list was read.
public struct RevocationSnapshot: Codable, Sendable, Hashable {
    /// The publisher's epoch.
    public var epoch: String
    /// Every `session.revoked` event of `epoch` numbered up to `seq` is in `sessions`.
    public var seq: UInt64
    /// Sessions revoked within the access-token lifetime plus leeway, oldest first.
    public var sessions: [RevokedSession]
    /// A snapshot at `seq` of `epoch`.
    public init(epoch: String, seq: UInt64, sessions: [RevokedSession]) {
        self.epoch = epoch
        self.seq = seq
        self.sessions = sessions
    }
    enum CodingKeys: Int, CodingKey {
        case epoch = 1, seq = 2, sessions = 3
    }
}

/// The token service's methods.
public enum TokenAPI {
    /// Mints a session for a user the identity service has verified
    /// (`ServiceContracts.issueSession`).
    public static let issueSession = ServiceContracts.issueSession
    /// Rotates a refresh token and mints a new access token;
    /// reuse of a superseded token revokes the session.
    public static let refresh = RPCMethod<RefreshRequest, SessionTokens>(name: "token.refresh", callers: [.gateway])
    /// Revokes one session (sign-out). Idempotent.
    public static let revokeSession = RPCMethod<RevokeSessionRequest, RevokedCount>(name: "token.revokeSession", idempotent: true, callers: [.gateway, .identity])
    /// Revokes every session of a user not revoked yet. Idempotent.
    public static let revokeAllSessions = RPCMethod<UserSessionsRequest, RevokedCount>(name: "token.revokeAllSessions", idempotent: true, callers: [.gateway, .identity])
    /// Lists a user's sessions. Idempotent.
    public static let listSessions = RPCMethod<UserSessionsRequest, SessionList>(name: "token.listSessions", idempotent: true, callers: [.gateway, .identity])
    /// Verifies an access token and returns its claims. Errors:
    /// `invalid_token`, `token_expired`, `session_revoked`.
    public static let verifyAccessToken = RPCMethod<VerifyRequest, VerifiedClaims>(name: "token.verifyAccessToken", idempotent: true, callers: [.gateway])
    /// The JWKS document of every published key, for verifying access tokens. Idempotent.
    public static let jwks = RPCMethod<Empty, JWKSDocument>(name: "token.jwks", idempotent: true, callers: [.gateway])
    /// Makes a new signing key; the old one stays published until its last token expires. The
    /// identity service calls it for the admin API (`POST /admin/v1/signing-keys/rotate`), naming
    /// the admin key as the actor; the gateway may not. Errors: `invalid_argument` (actor).
    public static let rotateKeys = RPCMethod<RotateKeysRequest, RotateKeysResponse>(name: "token.rotateKeys", callers: [.identity])
    /// The sessions revoked whose access tokens may still be valid, with the revocation feed's
    /// position (what a gateway loads at start and after missing events). Idempotent.
    public static let listRevocations = RPCMethod<Empty, RevocationSnapshot>(name: "token.listRevocations", idempotent: true, callers: [.gateway])

    /// Event topics.
    public enum Topic {
        /// Published for each revoked session, with a `SessionRevokedEvent`.
        public static let sessionRevoked = "session.revoked"
        /// Published about once a second with a `RevocationHeartbeat`.
        public static let heartbeat = "token.heartbeat"
    }
}
