import Foundation
import Mail
import GatehouseSupport
import GatehouseContracts
import IdentityCore
import IdentityPorts
import GRDB

/// Pruning the change log (`identity`'s prune job): retention and the per-user cap.
extension SQLiteUserStore {
    /// Migration 0010: `change_log_state.capCheckedThrough` (`cap_checked_through` since 0015), the newest seq the per-user cap has
    /// looked at. A prune checks only the users with a change after it, not the whole log.
    static func registerChangeLogCapCheckMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0010-change-log-cap-check") { db in
            try db.execute(sql: "ALTER TABLE change_log_state ADD COLUMN capCheckedThrough INTEGER NOT NULL DEFAULT 0")
        }
    }

    /// The users with a change in (`?1`, `?2`]: a range of the primary key, not a scan of the log
    /// (`NOT INDEXED`: the planner must not scan the whole (user_id, seq) index for the `DISTINCT`).
    static let changedUsersSQL = "SELECT DISTINCT user_id FROM user_changes NOT INDEXED WHERE seq > ?1 AND seq <= ?2"
    /// The user's newest seq beyond the cap (`OFFSET` the cap), if it is over it: a search of the
    /// (user_id, seq) index that reads at most cap + 1 entries.
    static let capThroughSQL = "SELECT seq FROM user_changes WHERE user_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?"

    /// Deletes the changes that occurred before `cutoff`, and of each user all but its newest
    /// `maxPerUser`, moving the watermarks in the same transactions (`identity`'s prune job).
    /// The writer is held for short batches only: the users over the cap are found by a read,
    /// and retention deletes at most `batch` changes per transaction. How many changes went.
    ///
    /// Only the users with a change since the previous run are checked against the cap (a user
    /// under it then can only cross it by a newer change), so a run's work follows the changes
    /// since the last run, not the log's size. Every delete runs with `secure_delete` on: the
    /// freed bytes (emails, profiles in the `user` JSON) are overwritten, as for every deletion
    /// of a user.
    @discardableResult
    public func pruneChanges(before cutoff: Date, maxPerUser: Int, batch: Int) async throws -> Int {
        var deleted = 0
        let cutoffMs = cutoff.millisecondsSince1970
        while true {
            let (count, more) = try await secureDeleting { db in
                let seqs = try Int64.fetchAll(
                    db, sql: "SELECT seq FROM user_changes WHERE occurred_at < ? ORDER BY occurred_at LIMIT ?", arguments: [cutoffMs, batch])
                guard let through = seqs.max() else { return (0, false) }
                let delete = try db.cachedStatement(sql: "DELETE FROM user_changes WHERE seq = ?")
                for seq in seqs { try delete.execute(arguments: [seq]) }
                try db.execute(sql: "UPDATE change_log_state SET pruned_through = max(pruned_through, ?) WHERE id = 1", arguments: [through])
                return (seqs.count, seqs.count == batch)
            }
            deleted += count
            if !more { break }
        }
        // One read: the head now, the users changed since the last check, those of them over the cap.
        let (checked, over) = try await read { db -> (Int64, [String]) in
            let from = try Int64.fetchOne(db, sql: "SELECT cap_checked_through FROM change_log_state WHERE id = 1") ?? 0
            let head = try Int64(clamping: Self.changeLogHead(db))
            let changed = try String.fetchAll(db.cachedStatement(sql: Self.changedUsersSQL), arguments: [from, head])
            let count = try db.cachedStatement(sql: Self.capThroughSQL)
            let over = try changed.filter { try Int64.fetchOne(count, arguments: [$0, maxPerUser]) != nil }
            return (head, over)
        }
        for userID in over {
            deleted += try await secureDeleting { db in
                // Recounted under the writer: the user's newest seq that goes, if still over the cap.
                guard let through = try Int64.fetchOne(db.cachedStatement(sql: Self.capThroughSQL), arguments: [userID, maxPerUser])
                else { return 0 }
                try db.execute(sql: "DELETE FROM user_changes WHERE user_id = ? AND seq <= ?", arguments: [userID, through])
                let count = db.changesCount
                try db.execute(
                    sql: """
                        INSERT INTO user_changes_pruned (user_id, pruned_through) VALUES (?1, ?2)
                        ON CONFLICT (user_id) DO UPDATE SET pruned_through = max(pruned_through, ?2)
                        """, arguments: [userID, through])
                try db.execute(sql: "UPDATE change_log_state SET cap_pruned_through = max(cap_pruned_through, ?) WHERE id = 1", arguments: [through])
                return count
            }
        }
        // Every user with a change through `checked` is within the cap now; later changes are the next run's.
        try await secureDeleting { db in
            try db.execute(
                sql: "UPDATE change_log_state SET cap_checked_through = max(cap_checked_through, ?) WHERE id = 1", arguments: [checked])
            // Per-user watermarks at or under the global one say nothing more.
            try db.execute(
                sql: "DELETE FROM user_changes_pruned WHERE pruned_through <= (SELECT pruned_through FROM change_log_state WHERE id = 1)")
        }
        return deleted
    }

    /// Runs `body` in a write transaction with SQLite's `secure_delete` on (see `deleteUserRow`).
    private func secureDeleting<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await run { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            return try body(db)
        }
    }
}
