import Foundation
import GRDB
import TokenPorts

extension SQLiteTokenStore {
    // MARK: Sweeping

    /// Deletes sessions that ended (revoked, past their absolute expiry, or idle past
    /// `idleTimeout`) more than `retention` before `now`, and every refresh token created more
    /// than `idleTimeout + retention` before `now`.
    ///
    /// Why the token rule keeps reuse detection for `retention` after a token is superseded:
    /// a session's `lastUsedAt` is the creation time of its current token, and a rotation after
    /// `lastUsedAt + idleTimeout` fails as idle. So a token created at `t` was superseded before
    /// `t + idleTimeout`, or its session went idle then. Either way, once `t` is more than
    /// `idleTimeout + retention` old, the token has been superseded (or its session ended) for
    /// more than `retention`, and presenting it can no longer be a grace replay or a reuse worth
    /// detecting. Until then a reused old token still revokes its session.
    ///
    /// Work is cut into group-committed writes of at most `batch` rows (tokens, by the
    /// `created_at` index) or `batch` session row ids (a range scan), so the refreshes committing
    /// beside a sweep wait for one small write at a time, never for the whole sweep.
    public func sweep(now: Date, retention: TimeInterval, idleTimeout: TimeInterval, batch: Int = 1000) async throws -> SweepCounts {
        var counts = SweepCounts()
        let ended = Self.ms(now.addingTimeInterval(-retention))
        let idle = Self.ms(now.addingTimeInterval(-(idleTimeout + retention)))
        let range = try await read { db in
            try Row.fetchOne(db, sql: "SELECT min(rowid) AS low, max(rowid) AS high FROM session").flatMap { row -> (Int64, Int64)? in
                guard let low: Int64 = row["low"], let high: Int64 = row["high"] else { return nil }
                return (low, high)
            }
        }
        if let (low, high) = range {
            var start = low
            while start <= high {
                try Task.checkCancellation()
                let (first, end) = (start, start + Int64(batch) - 1)
                counts.sessions += try await write { db in
                    try db.execute(
                        sql: """
                            DELETE FROM session WHERE rowid BETWEEN ? AND ?
                            AND (revoked_at < ? OR expires_at < ? OR last_used_at < ?)
                            """,
                        arguments: [first, end, ended, ended, idle])
                    return db.changesCount
                }
                start = end + 1
            }
        }
        while true {
            try Task.checkCancellation()
            let deleted = try await write { db in
                try db.execute(
                    sql: "DELETE FROM refreshToken WHERE hash IN (SELECT hash FROM refreshToken WHERE created_at < ? ORDER BY created_at LIMIT ?)",
                    arguments: [idle, batch])
                return db.changesCount
            }
            counts.refreshTokens += deleted
            if deleted < batch { break }
        }
        return counts
    }

    /// The number of stored sessions and refresh tokens (for tests and operators).
    public func rowCounts() async throws -> (sessions: Int, refreshTokens: Int) {
        try await read { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM session") ?? 0, try Int.fetchOne(db, sql: "SELECT count(*) FROM refreshToken") ?? 0)
        }
    }
}
