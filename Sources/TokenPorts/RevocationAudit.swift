import Foundation
import GatehouseContracts

/// The audit events of revocations, the same whichever store records them.
public enum RevocationAudit {
    /// The revocation reasons a user asks for (the others follow from a change of the user).
    private static let userReasons: Set<String> = ["sign_out", "sign_out_everywhere", "refresh_token_reused"]

    /// The event of a revocation: `sessions.revoked` for several, else `session.revoked` (the
    /// reuse of a refresh token: `refresh_token.reused`). The actor is the user for what a user
    /// asks for (sign-outs, a reused token), `system` for what a change of the user caused.
    /// Public so that every `TokenStorage` (`PostgresTokenStore`) records the same events.
    public static func event(_ sessions: [StoredSession], reason: String, at now: Date, all: Bool) -> AuditEvent? {
        guard let first = sessions.first else { return nil }
        let kind = reason == "refresh_token_reused"
            ? AuditEvent.Kind.refreshTokenReused : (all ? AuditEvent.Kind.sessionsRevoked : AuditEvent.Kind.sessionRevoked)
        return AuditEvent(
            occurredAt: now, kind: kind, userID: first.userID, actor: userReasons.contains(reason) ? AuditEvent.Actor.user : AuditEvent.Actor.system,
            reason: reason, sessionID: all ? "" : first.id, detailJSON: all ? #"{"sessions":\#(sessions.count)}"# : "")
    }
}
