import Foundation

/// What a refresh did.
public enum RotationOutcome: Sendable, Equatable {
    /// The token was the session's current one: the successor is stored.
    case rotated(StoredSession)
    /// The token was rotated within the grace window: the same successor is answered.
    case graceReplay(StoredSession)
    /// An older token came back: the session is revoked.
    case reused(StoredSession)
    /// No such token.
    case invalid
    /// The session is past its absolute end or idle too long.
    case expired(StoredSession)
    /// The session was revoked.
    case revoked(StoredSession)
}

/// What one sweep deleted.
public struct SweepCounts: Sendable, Equatable {
    /// Sessions deleted.
    public var sessions = 0
    /// Refresh tokens deleted.
    public var refreshTokens = 0
    /// Counts of deleted rows.
    public init(sessions: Int = 0, refreshTokens: Int = 0) {
        self.sessions = sessions
        self.refreshTokens = refreshTokens
    }
}
