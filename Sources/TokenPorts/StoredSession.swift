import Foundation
import GatehouseContracts

/// A session as stored.
public struct StoredSession: Sendable, Hashable {
    /// The session id (the `sid` claim).
    public var id: String
    /// The user it belongs to (the `sub` claim).
    public var userID: String
    /// When the session was created.
    public var createdAt: Date
    /// When the user authenticated (the `auth_time` claim).
    public var authTime: Date
    /// How the user authenticated (RFC 8176 values, the `amr` claim).
    public var amr: [String]
    /// The user agent and IP address it was created from.
    public var client: ClientInfo
    /// When its current refresh token was made (idle timeout counts from here).
    public var lastUsedAt: Date
    /// Its absolute end.
    public var expiresAt: Date
    /// When it was revoked, if it was.
    public var revokedAt: Date?
    /// Why (`sign_out`, `refresh_token_reused`, …); "" while live.
    public var revokeReason: String

    /// A session as a store reads it back.
    public init(
        id: String, userID: String, createdAt: Date, authTime: Date, amr: [String], client: ClientInfo, lastUsedAt: Date,
        expiresAt: Date, revokedAt: Date?, revokeReason: String
    ) {
        self.id = id
        self.userID = userID
        self.createdAt = createdAt
        self.authTime = authTime
        self.amr = amr
        self.client = client
        self.lastUsedAt = lastUsedAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.revokeReason = revokeReason
    }
}
