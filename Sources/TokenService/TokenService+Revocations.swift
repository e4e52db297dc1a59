import Foundation
import TokenPorts
import GatehouseContracts
import GatehouseSupport
import TokenCore

extension TokenService {
    // MARK: Revocations
    //
    // Every revocation is committed to `token.sqlite` (group commit: the write returns after the
    // commit) before its RPC replies and before its event is published, so an acknowledged
    // revocation survives `kill -9` and is in every later `listRevocations`.

    /// Publishes `session.revoked` for a session just revoked (committed), numbered by the feed.
    func announce(_ session: StoredSession) {
        revocationFeed.announce(SessionRevokedEvent(
            sessionID: session.id, userID: session.userID, reason: session.revokeReason, revokedAt: session.revokedAt ?? clock.now))
    }

    /// Revokes one session and publishes `session.revoked` (`token.revokeSession`); the reply
    /// names the session when this call revoked it.
    public func revokeSession(_ request: RevokeSessionRequest) async throws -> RevokedCount {
        guard !request.sessionID.isEmpty, request.sessionID.utf8.count <= 64 else { throw TokenError.invalidArgument("sessionID must be 1 to 64 bytes") }
        let reason = request.reason.isEmpty ? "sign_out" : String(request.reason.prefix(64))
        guard let revoked = try await store.revoke(sessionID: request.sessionID, reason: reason, at: clock.now) else { return RevokedCount(count: 0) }
        announce(revoked)
        return RevokedCount(count: 1, sessionIDs: [revoked.id])
    }

    /// The `revokeAllSessions` reasons that mean the user is gone: the client user agent and IP
    /// address of every session of the user are blanked with the revocation (`migrated`: an
    /// anonymous user deleted by a migration to an existing account).
    public static let deletionReasons: Set<String> = ["user_deleted", "anonymous_expired", "migrated"]

    /// Revokes every live session of a user (`token.revokeAllSessions`), but
    /// `exceptSessionID` when given. The reply names them,
    /// and the user's sessions revoked before whose access tokens may still be valid: a call
    /// retried after its first attempt committed (its reply lost) still names every session.
    /// For a deletion reason (`deletionReasons`), the user's sessions lose their client details.
    public func revokeAllSessions(_ request: UserSessionsRequest) async throws -> RevokedCount {
        guard !request.userID.isEmpty, request.userID.utf8.count <= 128 else { throw TokenError.invalidArgument("userID must be 1 to 128 bytes") }
        let reason = request.reason.isEmpty ? "sign_out_everywhere" : String(request.reason.prefix(64))
        if let except = request.exceptSessionID, except.isEmpty || except.utf8.count > 64 {
            throw TokenError.invalidArgument("exceptSessionID must be 1 to 64 bytes")
        }
        let now = clock.now
        let revoked = try await store.revokeAll(
            userID: request.userID, reason: reason, at: now, except: request.exceptSessionID,
            scrubClient: Self.deletionReasons.contains(reason))
        revoked.forEach(announce)
        // The ids of every session of the user whose tokens may still be valid: those just
        // revoked (committed, so the read sees them) and those revoked earlier (a retry).
        let since = now.addingTimeInterval(-(configuration.accessTokenTTL + configuration.leeway))
        let ids = try await store.revokedSessionIDs(userID: request.userID, since: since)
        return RevokedCount(count: Int64(revoked.count), sessionIDs: ids)
    }

    /// Every session revoked within the access-token lifetime plus leeway (older ones' tokens
    /// have all expired), and the feed's position (`token.listRevocations`).
    ///
    /// The position is read before the list: a revocation is committed before its number is
    /// drawn, so every event numbered up to `seq` is in the list (later ones may be too).
    /// With a shared store the database's snapshot gives both (every instance's revocations).
    public func listRevocations() async throws -> RevocationSnapshot {
        let since = clock.now.addingTimeInterval(-(configuration.accessTokenTTL + configuration.leeway))
        if revocationFeed.isShared, let log = store.sharedRevocationLog {
            let (seq, sessions) = try await log.revocationSnapshot(since: since)
            return RevocationSnapshot(epoch: revocationFeed.epoch, seq: seq, sessions: sessions)
        }
        let seq = revocationFeed.position
        let sessions = try await store.revokedSessions(since: since)
        return RevocationSnapshot(epoch: revocationFeed.epoch, seq: seq, sessions: sessions)
    }

    /// A page of the audit log (`token.listAudit`): `invalidArgument` for a limit outside
    /// 0 … `maxAuditPage` or a user id over 128 bytes.
    public func listAudit(_ request: ListAuditRequest) async throws -> ListAuditResponse {
        guard (0...maxAuditPage).contains(request.limit) else { throw TokenError.invalidArgument("limit must be between 0 and \(maxAuditPage)") }
        guard request.userID.utf8.count <= 128 else { throw TokenError.invalidArgument("userID must be at most 128 bytes") }
        if let since = request.since, !(0..<253_402_300_800).contains(since.timeIntervalSince1970) {
            throw TokenError.invalidArgument("since must be a time between 1970 and 9999")
        }
        return try await store.auditEvents(request)
    }
}
