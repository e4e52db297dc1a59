import Foundation
import Mail
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import GRDB
import IdentityCore
import Logging
import SQLiteSupport

/// The change log of users (issue 21; PROTOCOL.md "The change log"): written by triggers on
/// `users`, so every write path, whatever its SQL, records its change in its own transaction.
extension SQLiteUserStore {
    /// The columns of `users` the log's `user` JSON leaves out, each for a reason: the password
    /// hash is a secret (the JSON has `hasPassword` instead); `session_activity_at` is the
    /// anonymous sweep's bookkeeping, never shown. A test checks that every other column is in the
    /// JSON (under its camelCase key: the JSON's keys are `User`'s, the same on PostgreSQL).
    static let changeLogExcludedColumns: Set<String> = ["password_hash", "session_activity_at"]

    /// The log's `user` JSON of the row `NEW` or `OLD`, as SQL: what the triggers of migration
    /// 0009 write since migration 0015 renamed the columns they read (a test checks the trigger
    /// says this). The keys stay camelCase: they are the log's JSON, not column names.
    static func changeLogUserJSON(_ row: String) -> String {
        """
        json_object('id', \(row).id, 'email', \(row).email, 'emailNormalized', \(row).email_normalized,
            'emailVerified', \(row).email_verified, 'displayName', \(row).display_name, 'photoURL', \(row).photo_url,
            'hasPassword', \(row).password_hash IS NOT NULL, 'isAnonymous', \(row).is_anonymous, 'disabled', \(row).disabled,
            'customClaims', \(row).custom_claims, 'settings', \(row).settings, 'createdAt', \(row).created_at,
            'updatedAt', \(row).updated_at, 'lastSignInAt', \(row).last_sign_in_at, 'tokensValidAfter', \(row).tokens_valid_after,
            'version', \(row).version, 'providers', \(row).providers)
        """
    }

    /// Each kind of change and when it happened, as SQL over `OLD` and `NEW`, in the kinds' sort
    /// order: the update trigger's, as `changeLogUserJSON` (a test checks the trigger says these).
    static let changeLogKindConditions: [(kind: String, condition: String)] = [
        (UserChange.Kind.claims, "NEW.custom_claims IS NOT OLD.custom_claims"),
        (UserChange.Kind.disabled, "NEW.disabled = 1 AND OLD.disabled = 0"),
        (UserChange.Kind.email, "NEW.email IS NOT OLD.email"),
        (UserChange.Kind.emailVerified, "NEW.email_verified IS NOT OLD.email_verified"),
        (UserChange.Kind.enabled, "NEW.disabled = 0 AND OLD.disabled = 1"),
        (UserChange.Kind.profile, "NEW.display_name IS NOT OLD.display_name OR NEW.photo_url IS NOT OLD.photo_url"),
        (UserChange.Kind.providers, "NEW.providers IS NOT OLD.providers OR (NEW.password_hash IS NULL) IS NOT (OLD.password_hash IS NULL)"),
        (UserChange.Kind.settings, "NEW.settings IS NOT OLD.settings"),
        (UserChange.Kind.upgraded, "NEW.is_anonymous = 0 AND OLD.is_anonymous = 1"),
    ]

    /// `changeLogUserJSON` as migration 0009 wrote it, with the column names of its time. Frozen.
    private static func changeLogUserJSON0009(_ row: String) -> String {
        """
        json_object('id', \(row).id, 'email', \(row).email, 'emailNormalized', \(row).emailNormalized,
            'emailVerified', \(row).emailVerified, 'displayName', \(row).displayName, 'photoURL', \(row).photoURL,
            'hasPassword', \(row).passwordHash IS NOT NULL, 'isAnonymous', \(row).isAnonymous, 'disabled', \(row).disabled,
            'customClaims', \(row).customClaims, 'settings', \(row).settings, 'createdAt', \(row).createdAt,
            'updatedAt', \(row).updatedAt, 'lastSignInAt', \(row).lastSignInAt, 'tokensValidAfter', \(row).tokensValidAfter,
            'version', \(row).version, 'providers', \(row).providers)
        """
    }

    /// `changeLogKindConditions` as migration 0009 wrote them, with the column names of its time. Frozen.
    private static let changeLogKindConditions0009: [(kind: String, condition: String)] = [
        (UserChange.Kind.claims, "NEW.customClaims IS NOT OLD.customClaims"),
        (UserChange.Kind.disabled, "NEW.disabled = 1 AND OLD.disabled = 0"),
        (UserChange.Kind.email, "NEW.email IS NOT OLD.email"),
        (UserChange.Kind.emailVerified, "NEW.emailVerified IS NOT OLD.emailVerified"),
        (UserChange.Kind.enabled, "NEW.disabled = 0 AND OLD.disabled = 1"),
        (UserChange.Kind.profile, "NEW.displayName IS NOT OLD.displayName OR NEW.photoURL IS NOT OLD.photoURL"),
        (UserChange.Kind.providers, "NEW.providers IS NOT OLD.providers OR (NEW.passwordHash IS NULL) IS NOT (OLD.passwordHash IS NULL)"),
        (UserChange.Kind.settings, "NEW.settings IS NOT OLD.settings"),
        (UserChange.Kind.upgraded, "NEW.isAnonymous = 0 AND OLD.isAnonymous = 1"),
    ]

    /// Stores a user's linked providers; `updated_at` moves too, so the change log's `occurred_at`
    /// (the user's `updated_at`) is the time of the link.
    static let setProvidersSQL = "UPDATE users SET providers = ?, updated_at = max(updated_at, ?) WHERE id = ?"

    /// The current time in milliseconds, in SQL (for a deletion, which has no `updated_at`).
    static let changeLogNowSQL = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

    /// Migration 0009: `user_changes` and the triggers that write it; `change_log_state` (one row:
    /// the seq through which retention pruned, and the greatest seq the per-user cap pruned) and
    /// `user_changes_pruned` (per user: the greatest seq the cap pruned).
    ///
    /// The UPDATE trigger fires only for statements that set a column it compares (`UPDATE OF`):
    /// a sign-in stamp (`last_sign_in_at`) or the sweep's `session_activity_at` never runs it; its
    /// WHEN clause is a few column comparisons, so a rehash or a password change alone writes
    /// nothing. A deletion removes the user's earlier changes (its data leaves the log) and
    /// records `deleted`.
    static func registerChangeLogMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0009-change-log") { db in
            let any = changeLogKindConditions0009.map { "(\($0.condition))" }.joined(separator: " OR ")
            let kinds = changeLogKindConditions0009.map { "CASE WHEN \($0.condition) THEN '\($0.kind),' ELSE '' END" }
                .joined(separator: " || ")
            try db.execute(sql: """
                CREATE TABLE user_changes (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    userId TEXT NOT NULL,
                    kinds TEXT NOT NULL,
                    occurredAt INTEGER NOT NULL,
                    user TEXT
                ) STRICT;
                CREATE INDEX user_changes_user ON user_changes(userId, seq);
                CREATE INDEX user_changes_time ON user_changes(occurredAt);
                CREATE TABLE change_log_state (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    prunedThrough INTEGER NOT NULL DEFAULT 0,
                    capPrunedThrough INTEGER NOT NULL DEFAULT 0
                ) STRICT;
                INSERT INTO change_log_state (id) VALUES (1);
                CREATE TABLE user_changes_pruned (
                    userId TEXT NOT NULL PRIMARY KEY,
                    prunedThrough INTEGER NOT NULL
                ) STRICT, WITHOUT ROWID;
                CREATE TRIGGER users_change_log_update
                AFTER UPDATE OF displayName, photoURL, settings, email, emailVerified, providers, passwordHash, isAnonymous,
                    customClaims, disabled ON users
                WHEN \(any)
                BEGIN
                    INSERT INTO user_changes (userId, kinds, occurredAt, user)
                    VALUES (NEW.id, rtrim(\(kinds), ','), NEW.updatedAt, \(changeLogUserJSON0009("NEW")));
                END;
                CREATE TRIGGER users_change_log_delete AFTER DELETE ON users
                BEGIN
                    DELETE FROM user_changes WHERE userId = OLD.id;
                    DELETE FROM user_changes_pruned WHERE userId = OLD.id;
                    INSERT INTO user_changes (userId, kinds, occurredAt, user)
                    VALUES (OLD.id, '\(UserChange.Kind.deleted)', max(OLD.updatedAt, \(changeLogNowSQL)), NULL);
                END;
                """)
        }
    }

    // MARK: Reading

    private static let changeColumns = "seq, user_id, kinds, occurred_at, user_json"

    /// The newest seq ever given (0: none): it stays when the newest changes are pruned.
    static func changeLogHead(_ db: Database) throws -> UInt64 {
        let seq = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'user_changes'") ?? 0
        return UInt64(max(0, seq))
    }

    /// The changes after `afterSeq`, at most `limit`, the head and whether some were pruned
    /// (`identity.listChanges`), read in one transaction.
    public func listChanges(afterSeq: UInt64, limit: Int) async throws -> ListChangesResponse {
        let after = Int64(clamping: afterSeq)
        return try await read { db in
            let head = try Self.changeLogHead(db)
            let pruned = try Int64.fetchOne(db, sql: "SELECT pruned_through FROM change_log_state WHERE id = 1") ?? 0
            let changes = try Self.changes(db, sql: "WHERE seq > ? ORDER BY seq LIMIT ?", [after, limit])
            // The per-user cap pruned only its users' changes: they alone start again from a snapshot.
            let cap = Int(IdentityAPI.maxChangesPage)
            let capped = try String.fetchAll(
                db, sql: "SELECT user_id FROM user_changes_pruned WHERE pruned_through > ? ORDER BY user_id LIMIT ?", arguments: [after, cap + 1])
            return ListChangesResponse(
                changes: changes, head: head, truncated: after < pruned || capped.count > cap,
                resyncUserIDs: capped.count > cap ? [] : capped)
        }
    }

    /// A snapshot of the user, or its changes after `afterSeq` (`identity.userChanges`), read in
    /// one transaction (see `UserChangesRequest`).
    public func userChanges(id: UserID, resume: Bool, afterSeq: UInt64, limit: Int) async throws -> UserChangesResponse {
        let after = Int64(clamping: afterSeq)
        return try await read { db in
            let head = try Self.changeLogHead(db)
            let user = try Row.fetchOne(db.cachedStatement(sql: Self.selectByIDSQL), arguments: [id.rawValue]).map(Self.record)
            guard let user else {
                // Gone: a resumed stream learns how (its terminal change), if the log still has it.
                let terminal = try Self.changes(
                    db, sql: "WHERE user_id = ? AND seq > ? AND kinds IN ('deleted', 'migrated') ORDER BY seq DESC LIMIT 1",
                    [id.rawValue, after])
                guard resume, !terminal.isEmpty else { throw IdentityError.userNotFound }
                return UserChangesResponse(head: head, changes: terminal)
            }
            let snapshot = UserChangesResponse(user: User(user), head: head)
            guard resume else { return snapshot }
            let pruned = try Int64.fetchOne(
                db, sql: """
                    SELECT max(pruned_through, coalesce((SELECT pruned_through FROM user_changes_pruned WHERE user_id = ?), 0))
                    FROM change_log_state WHERE id = 1
                    """, arguments: [id.rawValue]) ?? 0
            var resync = UserChangesResponse(user: User(user), head: head, resync: true)
            guard afterSeq <= head, after >= pruned else { return resync }
            let changes = try Self.changes(db, sql: "WHERE user_id = ? AND seq > ? ORDER BY seq LIMIT ?", [id.rawValue, after, limit + 1])
            guard changes.count <= limit else { return resync }
            resync.user = nil
            return UserChangesResponse(head: head, changes: changes)
        }
    }

    /// The changes after `afterSeq` in order, at most `limit` (the publisher's tail).
    public func changes(after afterSeq: UInt64, limit: Int) async throws -> [UserChange] {
        try await read { db in try Self.changes(db, sql: "WHERE seq > ? ORDER BY seq LIMIT ?", [Int64(clamping: afterSeq), limit]) }
    }

    /// The newest seq given (0: none).
    public func changeLogHead() async throws -> UInt64 {
        try await read { db in try Self.changeLogHead(db) }
    }

    private static func changes(_ db: Database, sql: String, _ arguments: StatementArguments) throws -> [UserChange] {
        let statement = try db.cachedStatement(sql: "SELECT \(changeColumns) FROM user_changes \(sql)")
        return try Row.fetchAll(statement, arguments: arguments).map(change)
    }

    /// Logs the changes whose `user` JSON does not decode.
    private static let changeLogLogger = Logger(label: "gatehouse.identity")

    /// A row of `changeColumns` as a `UserChange`. A `user` JSON that does not decode is left out
    /// (the kinds stay) and logged by seq and user id, never its content: one bad row must not
    /// stop the log (the publisher, `listChanges`, `userChanges`) at its position.
    static func change(_ row: Row) -> UserChange {
        let seq = UInt64(max(0, row[0] as Int64))
        let userID: String = row[1]
        let kinds: String = row[2]
        let json: String? = row[4]
        var user: User?
        if let json {
            do { user = User(try LoggedUser.decode(json)) } catch {
                changeLogLogger.warning("change log: the user of change \(seq) (user \(userID)) does not decode; sent without it")
            }
        }
        return UserChange(
            seq: seq, userID: userID, kinds: kinds.split(separator: ",").map(String.init),
            occurredAt: Date(millisecondsSince1970: row[3]), user: user)
    }

    // MARK: Migration

    /// Deletes the anonymous user like `deleteAnonymous(id:)` and marks its terminal change
    /// `migrated` (not `deleted`) in the same transaction: a migration to an existing account.
    public func deleteMigratedAnonymous(id: UserID) async throws {
        let deleted = try await deleteUserRow(sql: "DELETE FROM users WHERE id = ? AND is_anonymous = 1", [id.rawValue]) { db in
            try db.execute(
                sql: "UPDATE user_changes SET kinds = ? WHERE seq = (SELECT max(seq) FROM user_changes WHERE user_id = ?)",
                arguments: [UserChange.Kind.migrated, id.rawValue])
        }
        guard deleted else { throw IdentityError.userNotFound }
    }

    // MARK: Commits

    /// Calls `onCommit` after each commit that added a change (on the writer's queue: it must
    /// return at once). The store keeps the observer as long as the returned token lives.
    public func observeChangeCommits(_ onCommit: @escaping @Sendable () -> Void) -> AnyObject {
        let observer = ChangeCommitObserver(onCommit)
        files.pool.add(transactionObserver: observer, extent: .observerLifetime)
        return observer
    }
}

/// Sees inserts into `user_changes` (the triggers' too) and calls back after their commit.
private final class ChangeCommitObserver: TransactionObserver, @unchecked Sendable {
    private let onCommit: @Sendable () -> Void
    // Touched only on the writer's serial queue.
    private var added = false

    init(_ onCommit: @escaping @Sendable () -> Void) { self.onCommit = onCommit }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
        if case .insert(tableName: "user_changes") = eventKind { return true }
        return false
    }

    func databaseDidChange(with event: DatabaseEvent) { added = true }

    func databaseDidCommit(_ db: Database) {
        guard added else { return }
        added = false
        onCommit()
    }

    func databaseDidRollback(_ db: Database) { added = false }
}
