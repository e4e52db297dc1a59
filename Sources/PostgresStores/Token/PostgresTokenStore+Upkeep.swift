import Foundation
import TokenCore
import TokenPorts
import GatehouseContracts
import PostgresNIO

extension PostgresTokenStore {
    // MARK: Sweeping

    /// `SQLiteTokenStore.sweep`'s rules: deletes sessions that ended (revoked, past their absolute
    /// expiry, or idle past `idleTimeout`) more than `retention` before `now`, every refresh
    /// token created more than `idleTimeout + retention` before `now`, and, for the shared
    /// revocation log, the revocation events older than `retention`.
    ///
    /// Each batch is a statement of its own (its own short transaction): sessions by ranges of
    /// `batch` insertion numbers (`ord`, SQLite's rowid), tokens and events `batch` at a time,
    /// oldest first, so refreshes beside a sweep wait for one small write at a time.
    public func sweep(_ cutoffs: SweepCutoffs, batch: Int) async throws -> SweepCounts {
        let batch = max(1, batch)
        var counts = SweepCounts()
        let ended = Self.ms(cutoffs.endedBefore)
        let idle = Self.ms(cutoffs.idleBefore)
        let range = try await run { [self] connection -> (Int64, Int64)? in
            guard let row = try await rows("SELECT min(ord), max(ord) FROM token_session", on: connection).first else { return nil }
            let (low, high) = try row.decode((Int64?, Int64?).self)
            guard let low, let high else { return nil }
            return (low, high)
        }
        if let (low, high) = range {
            var start = low
            while start <= high {
                try Task.checkCancellation()
                let end = start + Int64(batch) - 1
                counts.sessions += try await count(
                    """
                    WITH deleted AS (
                        DELETE FROM token_session WHERE ord BETWEEN \(start) AND \(end)
                        AND (revoked_at < \(ended) OR expires_at < \(ended) OR last_used_at < \(idle))
                        RETURNING 1
                    )
                    SELECT count(*) FROM deleted
                    """)
                start = end + 1
            }
        }
        counts.refreshTokens = try await deleteOldest(
            "DELETE FROM token_refresh_token WHERE hash IN (SELECT hash FROM token_refresh_token WHERE created_at < \(idle) ORDER BY created_at LIMIT \(batch))",
            batch: batch)
        try await deleteOldest(
            "DELETE FROM token_revocation_event WHERE seq IN (SELECT seq FROM token_revocation_event WHERE revoked_at < \(ended) ORDER BY seq LIMIT \(batch))",
            batch: batch)
        return counts
    }

    /// Runs `delete` (a DELETE of at most `batch` rows, oldest first) until it deletes fewer than
    /// `batch`, each run a statement of its own; how many rows went.
    @discardableResult
    func deleteOldest(_ delete: PostgresQuery, batch: Int) async throws -> Int {
        var total = 0
        while true {
            try Task.checkCancellation()
            var query: PostgresQuery = "WITH deleted AS ("
            query.sql += delete.sql + " RETURNING 1) SELECT count(*) FROM deleted"
            query.binds = delete.binds
            let deleted = try await count(query)
            total += deleted
            if deleted < batch { return total }
        }
    }

    /// The single count `query` answers.
    func count(_ query: PostgresQuery) async throws -> Int {
        try await run { [self] connection in
            Int(try await rows(query, on: connection).first?.decode(Int64.self) ?? 0)
        }
    }

    /// The number of stored sessions and refresh tokens (for tests and operators).
    public func rowCounts() async throws -> (sessions: Int, refreshTokens: Int) {
        try await run { [self] connection in
            guard let row = try await rows(
                "SELECT (SELECT count(*) FROM token_session), (SELECT count(*) FROM token_refresh_token)", on: connection
            ).first else { return (0, 0) }
            let (sessions, tokens) = try row.decode((Int64, Int64).self)
            return (Int(sessions), Int(tokens))
        }
    }

    // MARK: Audit

    /// The page of the audit log `request` asks for, as `AuditLogTable.page` reads it
    /// (`PostgresAuditLog.page`).
    public func auditEvents(_ request: ListAuditRequest) async throws -> ListAuditResponse {
        try await run { [queryLogger] connection in try await PostgresAuditLog.token.page(request, on: connection, logger: queryLogger) }
    }

    /// Deletes the events that happened before `cutoff`, oldest first, at most `batch` a
    /// statement (its own transaction); how many went.
    @discardableResult
    public func pruneAudit(before cutoff: Date, batch: Int) async throws -> Int {
        try await PostgresAuditLog.token.prune(before: cutoff, batch: batch, logger: queryLogger) { body in try await run(body) }
    }
}
