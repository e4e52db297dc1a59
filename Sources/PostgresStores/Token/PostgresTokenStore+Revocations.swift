import Foundation
import TokenPorts
import GatehouseContracts
import GatehouseSupport
import PostgresNIO

// Every revoking write (`revoke`, `revokeAll`, the reuse branch of `rotate`) runs in one
// transaction that revokes, draws the next numbers from the counter row (`UPDATE … SET seq = seq
// + n RETURNING seq`, whose row lock serialises revocations until commit, so commit order is seq
// order), inserts one `token_revocation_event` per revoked session and appends the audit event
// `RevocationAudit.event` makes, at the audit position drawn from the same row.
extension PostgresTokenStore {
    // MARK: Revoking

    /// Revokes one session; returns it if it was active. Two round trips: the session is read
    /// first (its id and user make the audit event), then one statement revokes it if it is
    /// still active, numbers the revocation and appends the event, all or nothing.
    public func revoke(sessionID: String, reason: String, at now: Date) async throws -> StoredSession? {
        guard var session = try await run({ [self] connection in
            try Self.first(await rows(
                "SELECT \(unescaped: Self.sessionColumns) FROM token_session WHERE id = \(sessionID) AND revoked_at IS NULL",
                on: connection))
        }) else { return nil }
        session.revokedAt = now
        session.revokeReason = reason
        let event = RevocationAudit.event([session], reason: reason, at: now, all: false)
        guard var revoked = try await run({ [self] connection in
            try await revokeOne(id: sessionID, reason: reason, at: now, audit: event, on: connection)
        }) else {
            return nil  // revoked meanwhile, elsewhere: that revocation has its own event
        }
        revoked.revokedAt = now
        return revoked
    }

    /// Revokes session `id` if it is active, numbers the revocation and appends `audit` (its
    /// `seq` drawn here), in one statement; the session as revoked, or nil when it was not active.
    func revokeOne(
        id: String, reason: String, at now: Date, audit event: AuditEvent?, on connection: PostgresConnection
    ) async throws -> StoredSession? {
        let at = Self.ms(now)
        let e = event ?? AuditEvent(occurredAt: now, kind: "", actor: "")
        return try Self.first(await rows(
            """
            WITH revoked AS (
                UPDATE token_session SET revoked_at = \(at), revoke_reason = \(reason)
                WHERE id = \(id) AND revoked_at IS NULL
                RETURNING \(unescaped: Self.sessionColumns)
            ), counter AS (
                UPDATE token_revocation_counter SET seq = seq + 1, audit_seq = audit_seq + 1
                WHERE EXISTS (SELECT 1 FROM revoked)
                RETURNING seq, audit_seq
            ), event AS (
                INSERT INTO token_revocation_event (seq, session_id, user_id, reason, revoked_at)
                SELECT c.seq, r.id, r.user_id, \(reason), \(at) FROM revoked r, counter c
            ), audit AS (
                INSERT INTO token_audit_log (seq, occurred_at, kind, user_id, actor, reason, email, ip, user_agent, session_id, detail)
                SELECT c.audit_seq, \(Self.ms(e.occurredAt)), \(e.kind), \(e.userID), \(e.actor), \(e.reason), \(e.email), \(e.ip),
                    \(e.userAgent), \(e.sessionID), \(e.detailJSON)
                FROM counter c WHERE \(event != nil)
            )
            SELECT \(unescaped: Self.sessionColumns) FROM revoked
            """, on: connection))
    }

    /// Revokes every active session of a user but `except`, in one transaction; returns those
    /// revoked (oldest first, numbered in that order). With `scrubClient`, blanks the user agent
    /// and IP address of every session of the user in the same transaction (PostgreSQL keeps the
    /// old row versions as dead tuples until VACUUM). Three round trips, four with revocations
    /// to record, five with `scrubClient`.
    public func revokeAll(
        userID: String, reason: String, at now: Date, except: String?, scrubClient: Bool
    ) async throws -> [StoredSession] {
        let at = Self.ms(now)
        return try await transaction { [self] connection in
            var revoked: [StoredSession] = []
            var auditSeq: Int64?
            for row in try await rows(
                """
                WITH revoked AS (
                    UPDATE token_session SET revoked_at = \(at), revoke_reason = \(reason)
                    WHERE user_id = \(userID) AND revoked_at IS NULL AND id IS DISTINCT FROM \(except)
                    RETURNING \(unescaped: Self.sessionColumns), ord
                ), numbered AS (
                    SELECT r.*, row_number() OVER (ORDER BY r.created_at, r.ord) AS n, count(*) OVER () AS total FROM revoked r
                ), counter AS (
                    UPDATE token_revocation_counter SET seq = seq + (SELECT count(*) FROM revoked), audit_seq = audit_seq + 1
                    WHERE EXISTS (SELECT 1 FROM revoked)
                    RETURNING seq, audit_seq
                ), event AS (
                    INSERT INTO token_revocation_event (seq, session_id, user_id, reason, revoked_at)
                    SELECT c.seq - n.total + n.n, n.id, n.user_id, \(reason), \(at) FROM numbered n, counter c
                )
                SELECT \(unescaped: Self.sessionColumnsOf("n")), c.audit_seq FROM numbered n, counter c ORDER BY n.n
                """, on: connection)
            {
                let (id, user, created, auth, amr, agent, ip, used, expires, revokedAt, why, audit) = try row.decode(
                    (String, String, Int64, Int64, String, String, String, Int64, Int64, Int64?, String, Int64).self)
                var session = Self.session((id, user, created, auth, amr, agent, ip, used, expires, revokedAt, why))
                session.revokedAt = now
                if scrubClient { session.client = ClientInfo() }
                revoked.append(session)
                auditSeq = audit
            }
            if scrubClient {
                try await rows(
                    "UPDATE token_session SET user_agent = '', ip = '' WHERE user_id = \(userID) AND (user_agent <> '' OR ip <> '')",
                    on: connection)
            }
            if let auditSeq, let event = RevocationAudit.event(revoked, reason: reason, at: now, all: true) {
                try await rows(
                    """
                    INSERT INTO token_audit_log (seq, occurred_at, kind, user_id, actor, reason, email, ip, user_agent, session_id, detail)
                    VALUES (\(auditSeq), \(Self.ms(event.occurredAt)), \(event.kind), \(event.userID), \(event.actor), \(event.reason),
                        \(event.email), \(event.ip), \(event.userAgent), \(event.sessionID), \(event.detailJSON))
                    """, on: connection)
            }
            return revoked
        }
    }

    /// `sessionColumns` of the table or CTE named `alias`.
    static func sessionColumnsOf(_ alias: String) -> String {
        sessionColumns.split(separator: ",").map { "\(alias)." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")
    }

    // MARK: Reading revocations

    /// The sessions revoked after `since`, oldest first.
    public func revokedSessions(since: Date) async throws -> [RevokedSession] {
        try await run { [self] connection in
            try await rows(
                "SELECT id, revoked_at FROM token_session WHERE revoked_at > \(Self.ms(since)) ORDER BY revoked_at, ord", on: connection
            ).map { row in
                let (id, at) = try row.decode((String, Int64).self)
                return RevokedSession(sessionID: id, revokedAt: Date(millisecondsSince1970: at))
            }
        }
    }

    /// The ids of `userID`'s sessions revoked after `since`.
    public func revokedSessionIDs(userID: String, since: Date) async throws -> [String] {
        try await run { [self] connection in
            try await rows(
                """
                SELECT id FROM token_session WHERE user_id = \(userID) AND revoked_at > \(Self.ms(since)) ORDER BY revoked_at, ord
                """, on: connection
            ).map { try $0.decode(String.self) }
        }
    }

    // MARK: SharedRevocationLog

    /// The revocations numbered after `seq`, in order, at most `limit` (epoch left empty). The
    /// numbers commit in order, so what a reader sees is always a prefix: no later number is
    /// visible before an earlier one.
    public func revocationEvents(after seq: UInt64, limit: Int) async throws -> [SessionRevokedEvent] {
        try await run { [self] connection in
            try await rows(
                """
                SELECT seq, session_id, user_id, reason, revoked_at FROM token_revocation_event
                WHERE seq > \(Int64(clamping: seq)) ORDER BY seq LIMIT \(max(0, limit))
                """, on: connection
            ).map { row in
                let (number, session, user, reason, at) = try row.decode((Int64, String, String, String, Int64).self)
                return SessionRevokedEvent(
                    sessionID: session, userID: user, reason: reason, revokedAt: Date(millisecondsSince1970: at), seq: UInt64(number))
            }
        }
    }

    /// The last number drawn, and the sessions revoked after `since` (oldest first), read by
    /// one statement: one snapshot, as a REPEATABLE READ transaction of two reads would give it
    /// (in one round trip instead of four). A revocation numbered up to that seq committed
    /// before the snapshot, so its session is in the list.
    public func revocationSnapshot(since: Date) async throws -> (seq: UInt64, sessions: [RevokedSession]) {
        try await run { [self] connection in
            var seq: UInt64 = 0
            var sessions: [RevokedSession] = []
            for row in try await rows(
                """
                SELECT c.seq, s.id, s.revoked_at FROM token_revocation_counter c
                LEFT JOIN token_session s ON s.revoked_at > \(Self.ms(since))
                ORDER BY s.revoked_at, s.ord
                """, on: connection)
            {
                let (number, id, at) = try row.decode((Int64, String?, Int64?).self)
                seq = UInt64(number)
                if let id, let at { sessions.append(RevokedSession(sessionID: id, revokedAt: Date(millisecondsSince1970: at))) }
            }
            return (seq, sessions)
        }
    }
}
