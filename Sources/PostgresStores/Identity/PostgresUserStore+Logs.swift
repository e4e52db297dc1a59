import Foundation
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import PostgresNIO
import PostgresSupport

// The logs of the identity store on PostgreSQL (issue 24): the change log (written by triggers
// on `users`, `+ChangeLog`), the audit log, and the anonymous sweep's bookkeeping, as the SQLite
// store keeps them (`SQLiteUserStore+ChangeLog`, `+Audit`, `+AnonymousSweep`).
extension PostgresUserStore {
    /// The notification channel the change-log triggers notify after a commit that added a change.
    static let changeChannel = "gatehouse_user_changes"

    /// Each kind of change and when it happened, as SQL over `OLD` and `NEW`, in the kinds' sort
    /// order (`SQLiteUserStore.changeLogKindConditions`, with PostgreSQL's booleans).
    static let changeLogKindConditions: [(kind: String, condition: String)] = [
        (UserChange.Kind.claims, "NEW.custom_claims IS DISTINCT FROM OLD.custom_claims"),
        (UserChange.Kind.disabled, "NEW.disabled AND NOT OLD.disabled"),
        (UserChange.Kind.email, "NEW.email IS DISTINCT FROM OLD.email"),
        (UserChange.Kind.emailVerified, "NEW.email_verified IS DISTINCT FROM OLD.email_verified"),
        (UserChange.Kind.enabled, "NOT NEW.disabled AND OLD.disabled"),
        (UserChange.Kind.profile, "NEW.display_name IS DISTINCT FROM OLD.display_name OR NEW.photo_url IS DISTINCT FROM OLD.photo_url"),
        (UserChange.Kind.providers,
         "NEW.providers IS DISTINCT FROM OLD.providers OR (NEW.password_hash IS NULL) IS DISTINCT FROM (OLD.password_hash IS NULL)"),
        (UserChange.Kind.settings, "NEW.settings IS DISTINCT FROM OLD.settings"),
        (UserChange.Kind.upgraded, "NOT NEW.is_anonymous AND OLD.is_anonymous"),
    ]

    /// The log's `user` JSON of the row `NEW` (`SQLiteUserStore.changeLogUserJSON`): the same keys,
    /// booleans as 0 or 1 as SQLite writes them, so `LoggedUser.decode` reads both stores' rows. The
    /// password hash is never in it (`hasPassword` instead), nor `session_activity_at`.
    static let changeLogUserJSON = """
        json_build_object('id', NEW.id, 'email', NEW.email, 'emailNormalized', NEW.email_normalized,
            'emailVerified', NEW.email_verified::int, 'displayName', NEW.display_name, 'photoURL', NEW.photo_url,
            'hasPassword', (NEW.password_hash IS NOT NULL)::int, 'isAnonymous', NEW.is_anonymous::int, 'disabled', NEW.disabled::int,
            'customClaims', NEW.custom_claims, 'settings', NEW.settings, 'createdAt', NEW.created_at,
            'updatedAt', NEW.updated_at, 'lastSignInAt', NEW.last_sign_in_at, 'tokensValidAfter', NEW.tokens_valid_after,
            'version', NEW.version, 'providers', NEW.providers)::text
        """

    /// The migrations of this part.
    ///
    /// 0005: `user_changes` and the triggers that write it. `seq` is drawn from the one row of
    /// `change_log_counter` (`UPDATE … SET head = head + 1 RETURNING head`) by the trigger, in the
    /// writing transaction: the row lock is held to its commit, so numbers commit in their order
    /// and a rollback returns its number (no gaps, where a SEQUENCE would commit out of order).
    /// `change_log_state` holds the watermarks of the prune (through which retention pruned, the
    /// greatest seq the per-user cap pruned, the newest seq the cap looked at) and
    /// `user_changes_pruned` the cap's per-user watermark. The tables have SQLite's columns, named
    /// alike (SQLite's migration 0015 took these names; its `user_changes.user` became `user_json`,
    /// `user` being reserved in PostgreSQL). The UPDATE trigger runs only for
    /// statements that set a compared column (`UPDATE OF`: a sign-in stamp or the sweep's
    /// `session_activity_at` never runs it) and only when a kind applies (`WHEN`). A deletion
    /// removes the user's earlier changes and records `deleted`. Both notify `changeChannel`
    /// (PostgreSQL delivers one notification per transaction, after its commit).
    ///
    /// 0006: the audit log (`AuditLogTable`'s shape and limits: characters where SQLite's
    /// length() counts characters, bytes where it casts to BLOB); `seq` from the one row of
    /// `audit_log_counter`, drawn just before the commit, so it too is gap-free in commit order.
    ///
    /// 0007: the session activity the sweep learned of (`session_activity_at`, not in the change
    /// log) and a partial index on the activity of anonymous users.
    static let logMigrations: [PostgresMigrator.Migration] = [
        .init("0005-change-log", [
            """
            CREATE TABLE user_changes (
                seq BIGINT NOT NULL PRIMARY KEY CHECK (seq >= 1),
                user_id TEXT NOT NULL,
                kinds TEXT NOT NULL,
                occurred_at BIGINT NOT NULL,
                user_json TEXT
            )
            """,
            "CREATE INDEX user_changes_user ON user_changes(user_id, seq)",
            "CREATE INDEX user_changes_time ON user_changes(occurred_at)",
            """
            CREATE TABLE change_log_counter (
                one BOOLEAN NOT NULL PRIMARY KEY DEFAULT true CHECK (one),
                head BIGINT NOT NULL CHECK (head >= 0)
            )
            """,
            "INSERT INTO change_log_counter (one, head) VALUES (true, 0)",
            """
            CREATE TABLE change_log_state (
                id INTEGER NOT NULL PRIMARY KEY DEFAULT 1 CHECK (id = 1),
                pruned_through BIGINT NOT NULL DEFAULT 0,
                cap_pruned_through BIGINT NOT NULL DEFAULT 0,
                cap_checked_through BIGINT NOT NULL DEFAULT 0
            )
            """,
            "INSERT INTO change_log_state (id) VALUES (1)",
            """
            CREATE TABLE user_changes_pruned (
                user_id TEXT NOT NULL PRIMARY KEY,
                pruned_through BIGINT NOT NULL
            )
            """,
            """
            CREATE FUNCTION users_change_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE next BIGINT;
            BEGIN
                UPDATE change_log_counter SET head = head + 1 RETURNING head INTO next;
                INSERT INTO user_changes (seq, user_id, kinds, occurred_at, user_json)
                VALUES (next, NEW.id, rtrim(\(changeLogKindConditions.map { "CASE WHEN \($0.condition) THEN '\($0.kind),' ELSE '' END" }
                    .joined(separator: " || ")), ','), NEW.updated_at, \(changeLogUserJSON));
                PERFORM pg_notify('\(changeChannel)', '');
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER users_change_log_update
            AFTER UPDATE OF display_name, photo_url, settings, email, email_verified, providers, password_hash, is_anonymous,
                custom_claims, disabled ON users
            FOR EACH ROW WHEN (\(changeLogKindConditions.map { "(\($0.condition))" }.joined(separator: " OR ")))
            EXECUTE FUNCTION users_change_log_update()
            """,
            """
            CREATE FUNCTION users_change_log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE next BIGINT;
            BEGIN
                DELETE FROM user_changes WHERE user_id = OLD.id;
                DELETE FROM user_changes_pruned WHERE user_id = OLD.id;
                UPDATE change_log_counter SET head = head + 1 RETURNING head INTO next;
                INSERT INTO user_changes (seq, user_id, kinds, occurred_at, user_json)
                VALUES (next, OLD.id, '\(UserChange.Kind.deleted)',
                    greatest(OLD.updated_at, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), NULL);
                PERFORM pg_notify('\(changeChannel)', '');
                RETURN NULL;
            END
            $$
            """,
            "CREATE TRIGGER users_change_log_delete AFTER DELETE ON users FOR EACH ROW EXECUTE FUNCTION users_change_log_delete()",
        ]),
        .init("0006-audit-log", [
            """
            CREATE TABLE audit_log (
                seq BIGINT NOT NULL PRIMARY KEY CHECK (seq >= 1),
                occurred_at BIGINT NOT NULL,
                kind TEXT NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 64),
                user_id TEXT NOT NULL DEFAULT '' CHECK (char_length(user_id) <= 128),
                actor TEXT NOT NULL CHECK (char_length(actor) BETWEEN 1 AND 128),
                reason TEXT NOT NULL DEFAULT '' CHECK (char_length(reason) <= 128),
                email TEXT NOT NULL DEFAULT '' CHECK (octet_length(email) <= 320),
                ip TEXT NOT NULL DEFAULT '' CHECK (char_length(ip) <= 64),
                user_agent TEXT NOT NULL DEFAULT '' CHECK (octet_length(user_agent) <= 512),
                session_id TEXT NOT NULL DEFAULT '' CHECK (char_length(session_id) <= 128),
                detail TEXT NOT NULL DEFAULT '' CHECK (
                    detail = '' OR (octet_length(detail) <= 4096 AND json_typeof(detail::json) IS NOT NULL))
            )
            """,
            "CREATE INDEX audit_log_user ON audit_log(user_id, seq)",
            "CREATE INDEX audit_log_time ON audit_log(occurred_at)",
            """
            CREATE TABLE audit_log_counter (
                one BOOLEAN NOT NULL PRIMARY KEY DEFAULT true CHECK (one),
                head BIGINT NOT NULL CHECK (head >= 0)
            )
            """,
            "INSERT INTO audit_log_counter (one, head) VALUES (true, 0)",
        ]),
        .init("0007-anonymous-sweep", [
            "ALTER TABLE users ADD COLUMN session_activity_at BIGINT",
            "CREATE INDEX users_anonymous_activity ON users ((\(activitySQL))) WHERE is_anonymous",
        ]),
    ]

    // MARK: Audit

    /// Appends `event` in the caller's transaction, its `seq` drawn from `audit_log_counter`
    /// (whose row lock the transaction then holds to its commit: it is the last statement
    /// `transaction` runs before COMMIT).
    static func appendAudit(_ e: AuditEvent, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(
            """
            WITH counter AS (UPDATE audit_log_counter SET head = head + 1 RETURNING head)
            INSERT INTO audit_log (seq, occurred_at, kind, user_id, actor, reason, email, ip, user_agent, session_id, detail)
            SELECT counter.head, \(e.occurredAt.millisecondsSince1970), \(e.kind), \(e.userID), \(e.actor), \(e.reason), \(e.email),
                \(e.ip), \(e.userAgent), \(e.sessionID), \(e.detailJSON)
            FROM counter
            """, logger: logger)
    }

    /// An empty write transaction: `transaction` appends the running call's pending audit event.
    public func recordPendingAudit() async throws {
        try await transaction { _ in }
    }

    /// The page of the audit log `request` asks for, as `AuditLogTable.page` reads it
    /// (`PostgresAuditLog.page`).
    public func auditEvents(_ request: ListAuditRequest) async throws -> ListAuditResponse {
        try await run { [queryLogger] connection in try await PostgresAuditLog.identity.page(request, on: connection, logger: queryLogger) }
    }

    /// Deletes the events that happened before `cutoff`, oldest first, at most `batch` a
    /// statement (its own transaction); how many went. PostgreSQL keeps the deleted row versions
    /// until VACUUM (SQLite's store overwrites them with `secure_delete`).
    @discardableResult
    public func pruneAudit(before cutoff: Date, batch: Int) async throws -> Int {
        try await PostgresAuditLog.identity.prune(before: cutoff, batch: batch, logger: queryLogger) { body in try await run(body) }
    }

    // MARK: The sweep of inactive anonymous users

    /// A user's known activity, as SQL: the expression of the partial index
    /// `users_anonymous_activity` (a query must spell it the same way to use the index).
    static let activitySQL = "greatest(created_at, coalesce(last_sign_in_at, 0), coalesce(session_activity_at, 0))"

    /// Anonymous users last active before `cutoff`, least recently active first, at most `limit`.
    public func anonymousCandidates(inactiveBefore cutoff: Date, limit: Int) async throws -> [AnonymousCandidate] {
        let limit = Int64(max(0, limit))
        return try await run { [queryLogger] connection in
            let rows = try await connection.query(
                """
                SELECT id, \(unescaped: Self.activitySQL) FROM users
                WHERE is_anonymous AND \(unescaped: Self.activitySQL) < \(cutoff.millisecondsSince1970)
                ORDER BY \(unescaped: Self.activitySQL), id LIMIT \(limit)
                """, logger: queryLogger)
            var candidates: [AnonymousCandidate] = []
            for try await (id, activity) in rows.decode((String, Int64).self) {
                candidates.append(AnonymousCandidate(id: UserID(rawValue: id), lastActivity: Date(millisecondsSince1970: activity)))
            }
            return candidates
        }
    }

    /// Keeps the later of the stored session activity and the one learned, in one transaction
    /// (the rows in id order, so two instances recording at once never deadlock). The change
    /// log's trigger does not run for it (`UPDATE OF`): the profile is not changed.
    public func recordSessionActivity(_ activity: [UserID: Date]) async throws {
        guard !activity.isEmpty else { return }
        let entries = activity.map { ($0.key.rawValue, $0.value.millisecondsSince1970) }.sorted { $0.0 < $1.0 }
        try await transaction { [queryLogger] connection in
            for (id, at) in entries {
                try await connection.query(
                    "UPDATE users SET session_activity_at = greatest(coalesce(session_activity_at, 0), \(at)) WHERE id = \(id)",
                    logger: queryLogger)
            }
        }
    }

    /// Deletes the user if it is still anonymous and inactive since before `cutoff` (its
    /// identities cascade; the trigger records `deleted`). When nothing was deleted, the running
    /// call's audit event is dropped, as SQLite's store does: nothing happened to record.
    public func deleteAnonymous(id: UserID, inactiveBefore cutoff: Date) async throws -> Bool {
        let audit = AuditScope.current
        return try await transaction { [queryLogger] connection in
            let rows = try await connection.query(
                """
                DELETE FROM users WHERE id = \(id.rawValue) AND is_anonymous
                    AND \(unescaped: Self.activitySQL) < \(cutoff.millisecondsSince1970)
                RETURNING id
                """, logger: queryLogger)
            var deleted = 0
            for try await _ in rows { deleted += 1 }
            if deleted == 0 {
                // Taken here, so `transaction` appends nothing and then marks it written.
                _ = audit?.take()
                return false
            }
            return true
        }
    }
}
