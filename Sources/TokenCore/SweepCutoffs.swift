import Foundation

/// What the token sweep deletes, as two instants: every store deletes the sessions that ended
/// (revoked or past their absolute expiry) before `endedBefore` or were last used before
/// `idleBefore`, and every refresh token created before `idleBefore`.
///
/// Why the token rule keeps reuse detection for `retention` after a token is superseded: a
/// session's `lastUsedAt` is the creation time of its current token, and a rotation after
/// `lastUsedAt + idleTimeout` fails as idle. So a token created at `t` was superseded before
/// `t + idleTimeout`, or its session went idle then. Either way, once `t` is more than
/// `idleTimeout + retention` old, the token has been superseded (or its session ended) for more
/// than `retention`, and presenting it can no longer be a grace replay or a reuse worth
/// detecting. Until then a reused old token still revokes its session.
public struct SweepCutoffs: Sendable, Equatable {
    /// Sessions revoked or expired before this go.
    public var endedBefore: Date
    /// Sessions last used before this go, and refresh tokens created before it.
    public var idleBefore: Date

    /// The cutoffs of a sweep at `now` keeping ended sessions for `retention` and refresh tokens
    /// for `idleTimeout + retention`.
    public init(now: Date, retention: TimeInterval, idleTimeout: TimeInterval) {
        endedBefore = now.addingTimeInterval(-retention)
        idleBefore = now.addingTimeInterval(-(idleTimeout + retention))
    }
}
