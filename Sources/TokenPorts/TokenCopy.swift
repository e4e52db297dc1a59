import Foundation

// The rows `gatehouse store copy` moves from a `token.sqlite` into another store.

/// A session with the columns a copy keeps besides `StoredSession`'s.
public struct CopiedSession: Sendable {
    /// The session.
    public var row: StoredSession
    /// Its current refresh token's hash.
    public var currentHash: Data?
    /// When it last rotated.
    public var rotatedAt: Date?
    /// A copied session.
    public init(row: StoredSession, currentHash: Data?, rotatedAt: Date?) {
        self.row = row
        self.currentHash = currentHash
        self.rotatedAt = rotatedAt
    }
}

/// A refresh token as stored (by hash).
public struct CopiedRefreshToken: Sendable {
    /// SHA-256 of the token.
    public var hash: Data
    /// Its session.
    public var sessionID: String
    /// When it was made.
    public var createdAt: Date
    /// A copied refresh token.
    public init(hash: Data, sessionID: String, createdAt: Date) {
        self.hash = hash
        self.sessionID = sessionID
        self.createdAt = createdAt
    }
}

/// An audit event as stored, its position kept.
public struct CopiedAuditRow: Sendable {
    /// Its position in the log.
    public var seq: Int64
    /// When it happened (milliseconds since 1970).
    public var occurredAt: Int64
    /// `kind`, `user_id`, `actor`, `reason`, `email`, `ip`, `user_agent`, `session_id`, `detail`.
    public var text: [String]
    /// A copied audit row.
    public init(seq: Int64, occurredAt: Int64, text: [String]) {
        self.seq = seq
        self.occurredAt = occurredAt
        self.text = text
    }
}

/// What a copy must match: the number of rows of each kind.
public struct TokenCopyCounts: Sendable, Equatable, CustomStringConvertible {
    /// Signing keys.
    public var keys = 0
    /// Sessions.
    public var sessions = 0
    /// Refresh tokens.
    public var refreshTokens = 0
    /// Audit events.
    public var auditEvents = 0
    /// Rows of `meta` (the refresh-successor secret).
    public var secrets = 0

    /// Counts.
    public init(keys: Int = 0, sessions: Int = 0, refreshTokens: Int = 0, auditEvents: Int = 0, secrets: Int = 0) {
        self.keys = keys
        self.sessions = sessions
        self.refreshTokens = refreshTokens
        self.auditEvents = auditEvents
        self.secrets = secrets
    }

    /// `N keys, N sessions, …`.
    public var description: String {
        "\(keys) signing keys, \(sessions) sessions, \(refreshTokens) refresh tokens, \(auditEvents) audit events, \(secrets) secrets"
    }
}

/// Why a copy cannot start or did not match.
public struct TokenCopyError: Error, CustomStringConvertible {
    /// What to do about it.
    public let description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}

/// A token store being copied (`gatehouse store copy`): the SQLite file, opened read-only.
public protocol TokenCopySource: Sendable {
    /// The number of rows of each kind.
    func counts() throws -> TokenCopyCounts
    /// The stored secrets.
    func secrets() throws -> [(name: String, value: Data)]
    /// Every signing key.
    func keys() throws -> [StoredSigningKey]
    /// Sessions after the position `after`, at most `limit`, and the last position read.
    func sessions(after: Int64, limit: Int) throws -> (rows: [CopiedSession], last: Int64)
    /// Refresh tokens after the hash `after` (nil: from the first), at most `limit`.
    func refreshTokens(after: Data?, limit: Int) throws -> [CopiedRefreshToken]
    /// Audit rows after `after`, at most `limit`.
    func auditRows(after: Int64, limit: Int) throws -> [CopiedAuditRow]
    /// Up to `count` refresh tokens and their sessions, to check the copy by.
    func sample(_ count: Int) throws -> [(hash: Data, sessionID: String)]
    /// The highest audit position ever given (so the target continues after it).
    func auditHighWater() throws -> Int64
}

/// The names and lengths of the secrets a token store keeps beside its keys.
public enum TokenSecrets {
    /// The name of the refresh-successor secret: 32 raw bytes, or 60 once sealed (12-byte nonce,
    /// 32 bytes, 16-byte tag).
    public static let successorName = "refresh-successor-key"
    /// The length of the unsealed refresh-successor secret.
    public static let plainLength = 32
}
