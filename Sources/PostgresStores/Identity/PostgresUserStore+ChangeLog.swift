import Foundation
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import PostgresNIO

// The change log of users on PostgreSQL (issue 21, 24; PROTOCOL.md "The change log"): written
// by the triggers of migration 0005 (`logMigrations`), read, pruned, and watched here.
extension PostgresUserStore {
    // MARK: Reading

    static let changeColumns = "seq, user_id, kinds, occurred_at, user_json"

    /// Runs `body` in a read-only REPEATABLE READ transaction: every statement of it sees the same
    /// snapshot (the head, the watermarks and the changes agree, as SQLite's read transaction).
    func readSnapshot<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await run { [queryLogger] connection in
            try await connection.inTransaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: queryLogger) { try await body(connection) }
        }
    }

    /// The first column of the first row of `query` as an `Int64`, or nil.
    static func int64(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws -> Int64? {
        for try await value in try await connection.query(query, logger: logger).decode(Int64?.self) { return value }
        return nil
    }

    /// The newest seq ever given (0: none), from `change_log_counter`: it stays when the newest
    /// changes are pruned.
    static func changeLogHead(on connection: PostgresConnection, logger: Logger) async throws -> UInt64 {
        let head = try await int64("SELECT head FROM change_log_counter", on: connection, logger: logger) ?? 0
        return UInt64(max(0, head))
    }

    /// The changes after `afterSeq`, at most `limit`, the head and whether some were pruned
    /// (`identity.listChanges`), read in one snapshot.
    public func listChanges(afterSeq: UInt64, limit: Int) async throws -> ListChangesResponse {
        let after = Int64(clamping: afterSeq)
        let limit = Int64(max(0, limit))
        let cap = Int(IdentityAPI.maxChangesPage)
        return try await readSnapshot { [queryLogger] connection in
            let head = try await Self.changeLogHead(on: connection, logger: queryLogger)
            let pruned = try await Self.int64("SELECT pruned_through FROM change_log_state", on: connection, logger: queryLogger) ?? 0
            let changes = try await Self.changes(
                "SELECT \(unescaped: Self.changeColumns) FROM user_changes WHERE seq > \(after) ORDER BY seq LIMIT \(limit)",
                on: connection, logger: queryLogger)
            // The per-user cap pruned only its users' changes: they alone start again from a snapshot.
            var capped: [String] = []
            let rows = try await connection.query(
                """
                SELECT user_id FROM user_changes_pruned WHERE pruned_through > \(after)
                ORDER BY user_id COLLATE "C" LIMIT \(Int64(cap + 1))
                """, logger: queryLogger)
            for try await id in rows.decode(String.self) { capped.append(id) }
            return ListChangesResponse(
                changes: changes, head: head, truncated: after < pruned || capped.count > cap,
                resyncUserIDs: capped.count > cap ? [] : capped)
        }
    }

    /// A snapshot of the user, or its changes after `afterSeq` (`identity.userChanges`), read in
    /// one snapshot (see `UserChangesRequest`).
    public func userChanges(id: UserID, resume: Bool, afterSeq: UInt64, limit: Int) async throws -> UserChangesResponse {
        let after = Int64(clamping: afterSeq)
        let limit = max(0, limit)
        return try await readSnapshot { [queryLogger] connection in
            let head = try await Self.changeLogHead(on: connection, logger: queryLogger)
            guard let user = try await Self.user(where: "id", id.rawValue, on: connection, logger: queryLogger) else {
                // Gone: a resumed stream learns how (its terminal change), if the log still has it.
                let terminal = try await Self.changes(
                    """
                    SELECT \(unescaped: Self.changeColumns) FROM user_changes
                    WHERE user_id = \(id.rawValue) AND seq > \(after) AND kinds IN ('deleted', 'migrated') ORDER BY seq DESC LIMIT 1
                    """, on: connection, logger: queryLogger)
                guard resume, !terminal.isEmpty else { throw IdentityError.userNotFound }
                return UserChangesResponse(head: head, changes: terminal)
            }
            let snapshot = UserChangesResponse(user: User(user), head: head)
            guard resume else { return snapshot }
            let pruned = try await Self.int64(
                """
                SELECT greatest(pruned_through, coalesce((SELECT pruned_through FROM user_changes_pruned WHERE user_id = \(id.rawValue)), 0))
                FROM change_log_state
                """, on: connection, logger: queryLogger) ?? 0
            let resync = UserChangesResponse(user: User(user), head: head, resync: true)
            guard afterSeq <= head, after >= pruned else { return resync }
            let changes = try await Self.changes(
                """
                SELECT \(unescaped: Self.changeColumns) FROM user_changes
                WHERE user_id = \(id.rawValue) AND seq > \(after) ORDER BY seq LIMIT \(Int64(limit + 1))
                """, on: connection, logger: queryLogger)
            guard changes.count <= limit else { return resync }
            return UserChangesResponse(head: head, changes: changes)
        }
    }

    /// The changes after `afterSeq` in order, at most `limit` (the publisher's tail). Commits
    /// come in seq order (the counter's row lock), so the changes a reader sees are always all
    /// those through some seq: it never skips one that commits later.
    public func changes(after afterSeq: UInt64, limit: Int) async throws -> [UserChange] {
        let after = Int64(clamping: afterSeq)
        let limit = Int64(max(0, limit))
        return try await run { [queryLogger] connection in
            try await Self.changes(
                "SELECT \(unescaped: Self.changeColumns) FROM user_changes WHERE seq > \(after) ORDER BY seq LIMIT \(limit)",
                on: connection, logger: queryLogger)
        }
    }

    /// The newest seq given (0: none).
    public func changeLogHead() async throws -> UInt64 {
        try await run { [queryLogger] connection in try await Self.changeLogHead(on: connection, logger: queryLogger) }
    }

    /// Logs the changes whose `user` JSON does not decode.
    private static let changeLogLogger = Logger(label: "gatehouse.identity")

    /// The changes `query` (of `changeColumns`) reads. A `user` JSON that does not decode is left
    /// out (the kinds stay) and logged by seq and user id, never its content: one bad row must
    /// not stop the log at its position (as `SQLiteUserStore.change`).
    static func changes(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws -> [UserChange] {
        var changes: [UserChange] = []
        let rows = try await connection.query(query, logger: logger)
        for try await (seq, userID, kinds, at, json) in rows.decode((Int64, String, String, Int64, String?).self) {
            var user: User?
            if let json {
                do { user = User(try LoggedUser.decode(json)) } catch {
                    changeLogLogger.warning("change log: the user of change \(seq) (user \(userID)) does not decode; sent without it")
                }
            }
            changes.append(UserChange(
                seq: UInt64(max(0, seq)), userID: userID, kinds: kinds.split(separator: ",").map(String.init),
                occurredAt: Date(millisecondsSince1970: at), user: user))
        }
        return changes
    }

    // MARK: Migration

    /// Deletes the anonymous user like `deleteAnonymous(id:)` and marks its terminal change
    /// `migrated` (not `deleted`) in the same transaction: a migration to an existing account.
    public func deleteMigratedAnonymous(id: UserID) async throws {
        try await transaction { [queryLogger] connection in
            var deleted = 0
            for try await _ in try await connection.query(
                "DELETE FROM users WHERE id = \(id.rawValue) AND is_anonymous RETURNING id", logger: queryLogger)
            {
                deleted += 1
            }
            guard deleted == 1 else { throw IdentityError.userNotFound }
            // The deletion trigger's change is the user's newest (the user's row lock was held).
            try await connection.query(
                """
                UPDATE user_changes SET kinds = \(UserChange.Kind.migrated)
                WHERE seq = (SELECT max(seq) FROM user_changes WHERE user_id = \(id.rawValue))
                """, logger: queryLogger)
        }
    }

    // MARK: Pruning

    /// Deletes the changes that occurred before `cutoff`, and of each user all but its newest
    /// `maxPerUser`, moving the watermarks in the same transactions (`identity`'s prune job), as
    /// `SQLiteUserStore.pruneChanges`: retention deletes at most `batch` changes a statement;
    /// only the users with a change since the previous run are checked against the cap. How many
    /// changes went. Safe beside writers and another instance's prune: the cap's deletion of a
    /// user's changes first takes a key-share lock on the user's row, so it never leaves a
    /// watermark behind a deletion of the user that committed meanwhile. PostgreSQL keeps the
    /// deleted row versions until VACUUM (SQLite's store overwrites them with `secure_delete`).
    @discardableResult
    public func pruneChanges(before cutoff: Date, maxPerUser: Int, batch: Int) async throws -> Int {
        var deleted = 0
        let cutoffMs = cutoff.millisecondsSince1970
        let batch = Int64(max(1, batch))
        let cap = Int64(max(0, maxPerUser))
        while true {
            // One statement, so one transaction: the deletion and the watermark move together.
            let (count, selected) = try await run { [queryLogger] connection -> (Int, Int) in
                let rows = try await connection.query(
                    """
                    WITH doomed AS (
                        SELECT seq FROM user_changes WHERE occurred_at < \(cutoffMs) ORDER BY occurred_at LIMIT \(batch)
                    ), deleted AS (
                        DELETE FROM user_changes WHERE seq IN (SELECT seq FROM doomed) RETURNING seq
                    ), moved AS (
                        UPDATE change_log_state SET pruned_through = greatest(pruned_through, (SELECT max(seq) FROM deleted))
                        WHERE EXISTS (SELECT 1 FROM deleted)
                    )
                    SELECT (SELECT count(*) FROM deleted), (SELECT count(*) FROM doomed)
                    """, logger: queryLogger)
                for try await (count, selected) in rows.decode((Int64, Int64).self) { return (Int(count), Int(selected)) }
                return (0, 0)
            }
            deleted += count
            if selected < batch { break }
        }
        // One snapshot: the head now, the users changed since the last check, those of them over the cap.
        let (checked, over) = try await readSnapshot { [queryLogger] connection -> (Int64, [String]) in
            let from = try await Self.int64("SELECT cap_checked_through FROM change_log_state", on: connection, logger: queryLogger) ?? 0
            let head = try await Self.int64("SELECT head FROM change_log_counter", on: connection, logger: queryLogger) ?? 0
            var over: [String] = []
            let rows = try await connection.query(
                """
                SELECT changed.user_id FROM (SELECT DISTINCT user_id FROM user_changes WHERE seq > \(from) AND seq <= \(head)) changed
                WHERE EXISTS (SELECT 1 FROM user_changes c WHERE c.user_id = changed.user_id ORDER BY c.seq DESC LIMIT 1 OFFSET \(cap))
                ORDER BY changed.user_id COLLATE "C"
                """, logger: queryLogger)
            for try await id in rows.decode(String.self) { over.append(id) }
            return (head, over)
        }
        for userID in over {
            deleted += try await transaction { [queryLogger] connection -> Int in
                // A deletion of the user in flight commits first (it removes the user's changes and watermark).
                try await connection.query("SELECT 1 FROM users WHERE id = \(userID) FOR KEY SHARE", logger: queryLogger)
                // Recounted under the lock: the user's newest seq that goes, if still over the cap.
                guard let through = try await Self.int64(
                    "SELECT seq FROM user_changes WHERE user_id = \(userID) ORDER BY seq DESC LIMIT 1 OFFSET \(cap)",
                    on: connection, logger: queryLogger)
                else { return 0 }
                var count = 0
                for try await _ in try await connection.query(
                    "DELETE FROM user_changes WHERE user_id = \(userID) AND seq <= \(through) RETURNING 1", logger: queryLogger)
                {
                    count += 1
                }
                try await connection.query(
                    """
                    INSERT INTO user_changes_pruned (user_id, pruned_through) VALUES (\(userID), \(through))
                    ON CONFLICT (user_id) DO UPDATE SET pruned_through = greatest(user_changes_pruned.pruned_through, EXCLUDED.pruned_through)
                    """, logger: queryLogger)
                try await connection.query(
                    "UPDATE change_log_state SET cap_pruned_through = greatest(cap_pruned_through, \(through))", logger: queryLogger)
                return count
            }
        }
        // Every user with a change through `checked` is within the cap now; later changes are the next run's.
        try await transaction { [queryLogger] connection in
            try await connection.query(
                "UPDATE change_log_state SET cap_checked_through = greatest(cap_checked_through, \(checked))", logger: queryLogger)
            // Per-user watermarks at or under the global one say nothing more.
            try await connection.query(
                "DELETE FROM user_changes_pruned WHERE pruned_through <= (SELECT pruned_through FROM change_log_state)",
                logger: queryLogger)
        }
        return deleted
    }

    // MARK: Commits

    /// Calls `onCommit` after each commit that added a change, made by this instance or any other
    /// on the database (the triggers' `pg_notify`, delivered after the commit), while the returned
    /// token lives. The token listens on a pool connection of its own (held while it lives); when
    /// that connection fails it reconnects with backoff. `onCommit` is also called once each time
    /// the listening starts (the first time too): a change may have committed while nobody
    /// listened.
    public func observeChangeCommits(_ onCommit: @escaping @Sendable () -> Void) -> AnyObject {
        ChangeCommitListener(client: client, channel: Self.changeChannel, logger: logger, onCommit: onCommit)
    }
}
