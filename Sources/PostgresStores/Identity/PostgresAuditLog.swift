import Foundation
import GatehouseContracts
import GatehouseSupport
import Logging
import PostgresNIO

/// Reading and pruning an audit log table on PostgreSQL, the same for both stores (as
/// `AuditLogTable` is for SQLite's): the identity store's `audit_log` and the token store's
/// `token_audit_log` have one shape. Appending stays with each store: each numbers its events
/// from a counter of its own, in the statement that makes the change.
enum PostgresAuditLog: String {
    case identity = "audit_log"
    case token = "token_audit_log"

    /// The page `request` asks for (its limit already checked: 0 is `maxAuditPage`), in one
    /// statement: in `seq` order, after `afterSeq`, of one user when given, from the first event at
    /// or after `since` when given; `nextAfterSeq` is the last listed `seq`, or the request's `afterSeq`.
    func page(_ request: ListAuditRequest, on connection: PostgresConnection, logger: Logger) async throws -> ListAuditResponse {
        let after = Int64(clamping: request.afterSeq)
        let limit = Int64(request.limit == 0 ? maxAuditPage : max(0, request.limit))
        // Whether to filter by time is a flag of its own: any value of `since` is a valid time.
        let user = request.userID
        let filterSince = request.since != nil
        let since = request.since?.millisecondsSince1970 ?? 0
        let rows = try await connection.query(
            """
            SELECT seq, occurred_at, kind, user_id, actor, reason, email, ip, user_agent, session_id, detail FROM \(unescaped: rawValue)
            WHERE seq > \(after)
                AND (NOT \(filterSince) OR seq >= (SELECT min(seq) FROM \(unescaped: rawValue) WHERE occurred_at >= \(since)))
                AND (\(user) = '' OR user_id = \(user))
                AND (NOT \(filterSince) OR occurred_at >= \(since))
            ORDER BY seq LIMIT \(limit)
            """, logger: logger)
        var events: [AuditEvent] = []
        for try await (seq, at, kind, user, actor, reason, email, ip, agent, session, detail) in rows.decode(
            (Int64, Int64, String, String, String, String, String, String, String, String, String).self)
        {
            events.append(AuditEvent(
                seq: UInt64(seq), occurredAt: Date(millisecondsSince1970: at), kind: kind, userID: user, actor: actor,
                reason: reason, email: email, ip: ip, userAgent: agent, sessionID: session, detailJSON: detail))
        }
        return ListAuditResponse(events: events, nextAfterSeq: events.last?.seq ?? request.afterSeq)
    }

    /// Deletes at most `batch` of the events that happened before `cutoff`, oldest first; how many went.
    func pruneBatch(before cutoff: Date, batch: Int, on connection: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await connection.query(
            """
            WITH deleted AS (
                DELETE FROM \(unescaped: rawValue) WHERE seq IN (
                    SELECT seq FROM \(unescaped: rawValue) WHERE occurred_at < \(cutoff.millisecondsSince1970) ORDER BY occurred_at LIMIT \(Int64(batch)))
                RETURNING 1
            )
            SELECT count(*) FROM deleted
            """, logger: logger)
        for try await n in rows.decode(Int64.self) { return Int(n) }
        return 0
    }

    /// Prunes in batches of `batch`, each a call of `run` (its own transaction), until one
    /// deletes fewer; how many went.
    func prune(before cutoff: Date, batch: Int, logger: Logger, run: (@escaping @Sendable (PostgresConnection) async throws -> Int) async throws -> Int)
        async throws -> Int
    {
        let batch = max(1, batch)
        var deleted = 0
        while true {
            let count = try await run { connection in try await pruneBatch(before: cutoff, batch: batch, on: connection, logger: logger) }
            deleted += count
            if count < batch { return deleted }
        }
    }
}
