import Foundation
import GRDB
import TokenCore
import TokenPorts

extension SQLiteTokenStore {
    // MARK: Sweeping

    /// Deletes what `cutoffs` names. Work is cut into group-committed writes of at most `batch`
    /// rows (tokens, by the `created_at` index) or `batch` session row ids (a range scan).
    public func sweep(_ cutoffs: SweepCutoffs, batch: Int) async throws -> SweepCounts {
        var counts = SweepCounts()
        let ended = Self.ms(cutoffs.endedBefore)
        let idle = Self.ms(cutoffs.idleBefore)
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
