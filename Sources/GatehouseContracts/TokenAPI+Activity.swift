import Foundation

// `token.lastActivity` (proto/token.proto): when each of some users last used a session, asked
// by the identity service's sweep of inactive anonymous users, so that nothing is written for
// it on the refresh path.

/// `token.lastActivity` request.
public struct LastActivityRequest: Codable, Sendable, Hashable {
    /// The users asked about (at most `TokenAPI.maxLastActivityUsers`, each 1 to 128 bytes).
    public var userIDs: [String]
    /// A question about `userIDs`.
    public init(userIDs: [String]) { self.userIDs = userIDs }
    enum CodingKeys: Int, CodingKey { case userIDs = 1 }
}

/// When one user last used a session.
public struct UserActivity: Codable, Sendable, Hashable {
    /// The user.
    public var userID: String
    /// The latest `lastUsedAt` of the user's stored sessions (issue or last refresh), revoked
    /// and expired ones included.
    public var lastUsedAt: Date
    /// `userID` last used a session at `lastUsedAt`.
    public init(userID: String, lastUsedAt: Date) {
        self.userID = userID
        self.lastUsedAt = lastUsedAt
    }
    enum CodingKeys: Int, CodingKey { case userID = 1, lastUsedAt = 2 }
}

/// `token.lastActivity` reply.
public struct LastActivityResponse: Codable, Sendable, Hashable {
    /// One entry per asked user with at least one stored session, in no particular order; a
    /// user without one is absent.
    public var entries: [UserActivity]
    /// A reply listing `entries`.
    public init(entries: [UserActivity]) { self.entries = entries }
    enum CodingKeys: Int, CodingKey { case entries = 1 }
}

extension TokenAPI {
    /// When each of the given users last used a session (`LastActivityRequest`). Idempotent;
    /// called by the identity service's anonymous sweep. Errors: `invalid_argument`.
    public static let lastActivity = RPCMethod<LastActivityRequest, LastActivityResponse>(
        name: "token.lastActivity", idempotent: true, callers: [.identity])

    /// The most users one `token.lastActivity` call may ask about.
    public static let maxLastActivityUsers = 1000
}
