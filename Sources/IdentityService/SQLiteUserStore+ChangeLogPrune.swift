import Foundation
import GRDB

/// Pruning the change log (`identity`'s prune job): retention and the per-user cap.
extension SQLiteUserStore {
    /// Deletes the changes that occurred before `cutoff`, and of each user all but its newest
    /// `maxPerUser`, moving the watermarks in the same transactions (`identity`'s prune job).
    /// The writer is held for short batches only: the users over the cap are found by a read,
    /// and retention deletes at most `batch` changes per transaction. How many changes went.
    @discardableResult
    public func pruneChanges(before cutoff: Date, maxPerUser: Int, batch: Int = 5000) async throws -> Int {
        var deleted = 0
        let cutoffMs = cutoff.millisecondsSince1970
        while true {
            let (count, more) = try await run { db in
                let seqs = try Int64.fetchAll(
                    db, sql: "SELECT seq FROM user_changes WHERE occurredAt < ? ORDER BY occurredAt LIMIT ?", arguments: [cutoffMs, batch])
                guard let through = seqs.max() else { return (0, false) }
                let delete = try db.cachedStatement(sql: "DELETE FROM user_changes WHERE seq = ?")
                for seq in seqs { try delete.execute(arguments: [seq]) }
                try db.execute(sql: "UPDATE change_log_state SET prunedThrough = max(prunedThrough, ?) WHERE id = 1", arguments: [through])
                return (seqs.count, seqs.count == batch)
            }
            deleted += count
            if !more { break }
        }
        let over = try await read { db in
            try String.fetchAll(db, sql: "SELECT userId FROM user_changes GROUP BY userId HAVING count(*) > ?", arguments: [maxPerUser])
        }
        for userID in over {
            deleted += try await run { db in
                // Recounted under the writer: the user's newest seq that goes, if still over the cap.
                guard let through = try Int64.fetchOne(
                    db, sql: "SELECT seq FROM user_changes WHERE userId = ? ORDER BY seq DESC LIMIT 1 OFFSET ?", arguments: [userID, maxPerUser])
                else { return 0 }
                try db.execute(sql: "DELETE FROM user_changes WHERE userId = ? AND seq <= ?", arguments: [userID, through])
                let count = db.changesCount
                try db.execute(
                    sql: """
                        INSERT INTO user_changes_pruned (userId, prunedThrough) VALUES (?1, ?2)
                        ON CONFLICT (userId) DO UPDATE SET prunedThrough = max(prunedThrough, ?2)
                        """, arguments: [userID, through])
                try db.execute(sql: "UPDATE change_log_state SET capPrunedThrough = max(capPrunedThrough, ?) WHERE id = 1", arguments: [through])
                return count
            }
        }
        // Per-user watermarks at or under the global one say nothing more.
        try await run { db in
            try db.execute(
                sql: "DELETE FROM user_changes_pruned WHERE prunedThrough <= (SELECT prunedThrough FROM change_log_state WHERE id = 1)")
        }
        return deleted
    }
}
