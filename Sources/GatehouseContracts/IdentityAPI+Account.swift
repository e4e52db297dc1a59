import Foundation

// Wire messages of the identity service's self-service account methods (proto/identity.proto).

/// The caller of a self-service method (`gatehouse.identity.v1.AuthenticatedCaller`), as the
/// gateway verified it from the access token. The identity service acts on this user only, and
/// compares `authTime` with its recent-login window (`requires_recent_login`).
public struct AuthenticatedCaller: Codable, Sendable, Hashable {
    /// The user (the token's `sub`).
    public var userID: String
    /// The session (the token's `sid`).
    public var sessionID: String
    /// When the user last authenticated for this session (the token's `auth_time`).
    public var authTime: Date

    /// The caller `userID`, on session `sessionID`, authenticated at `authTime`.
    public init(userID: String, sessionID: String, authTime: Date) {
        self.userID = userID
        self.sessionID = sessionID
        self.authTime = authTime
    }

    enum CodingKeys: Int, CodingKey { case userID = 1, sessionID = 2, authTime = 3 }
}
