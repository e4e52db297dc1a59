import Foundation

/// What a refresh does with the session its token belongs to: the one rule both token stores
/// apply (issue 4; rotation with reuse detection). Pure: the store reads the session's state (in
/// the transaction, under the lock, that will apply the answer), asks `decide`, and applies it.
public enum RefreshRotation {
    /// What a store read of the presented token's session.
    public struct State: Sendable, Hashable {
        /// Whether the session was revoked.
        public var revoked: Bool
        /// The session's absolute end.
        public var expiresAt: Date
        /// When its current refresh token was made (the idle timeout counts from here).
        public var lastUsedAt: Date
        /// The hash of the session's current refresh token.
        public var currentHash: Data?
        /// When the session last rotated (nil: never).
        public var rotatedAt: Date?

        /// The state of a session as read.
        public init(revoked: Bool, expiresAt: Date, lastUsedAt: Date, currentHash: Data?, rotatedAt: Date?) {
            self.revoked = revoked
            self.expiresAt = expiresAt
            self.lastUsedAt = lastUsedAt
            self.currentHash = currentHash
            self.rotatedAt = rotatedAt
        }
    }

    /// What to do.
    public enum Decision: Sendable, Hashable {
        /// The session was revoked: refuse, write nothing.
        case revoked
        /// The session is past its end or idle past the timeout: refuse, write nothing.
        case expired
        /// The token is the current one: store the successor as current (`rotatedAt` and
        /// `lastUsedAt` become now).
        case rotate
        /// The token is the one just rotated, within the grace window: answer the same successor,
        /// write nothing.
        case graceReplay
        /// Any other token of the session: revoke the session (`refresh_token_reused`).
        case reuse
    }

    /// The reason a session revoked for reuse records.
    public static let reuseReason = "refresh_token_reused"

    /// The decision for `presented` (a refresh token's hash) whose successor would be `successor`,
    /// at `now`. Revoked first, then expired (`now` at or past the end, or at or past
    /// `lastUsedAt + idleTimeout`), then current, then a replay within `grace` seconds of the
    /// rotation (inclusive), else reuse.
    public static func decide(
        _ state: State, presented: Data, successor: Data, now: Date, grace: TimeInterval, idleTimeout: TimeInterval
    ) -> Decision {
        if state.revoked { return .revoked }
        if now >= state.expiresAt || now >= state.lastUsedAt.addingTimeInterval(idleTimeout) { return .expired }
        if state.currentHash == presented { return .rotate }
        if state.currentHash == successor, let rotatedAt = state.rotatedAt, now.timeIntervalSince(rotatedAt) <= grace {
            return .graceReplay
        }
        return .reuse
    }
}
