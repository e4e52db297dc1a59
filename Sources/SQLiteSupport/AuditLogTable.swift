import Foundation
import GatehouseContracts
import GatehouseSupport
import GRDB

/// The `audit_log` table (issue 22 §3), the same in both services' databases: its schema, the
/// append in the caller's transaction, a page of it, and the prune. `seq` is AUTOINCREMENT so a
/// pruned position is never handed out again. Its columns have PostgreSQL's names (`user_id`,
/// `occurred_at`, …) since the identity store's migration 0015 and the token store's 0006
/// renamed them (`columnRenames`).
public enum AuditLogTable {
    /// The table and its indexes as the identity store's migration 0011 and the token store's
    /// 0004 created them, columns in camelCase. Frozen: those migrations run it as it is.
    public static let createSQL = """
        CREATE TABLE audit_log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            occurredAt INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
            userId TEXT NOT NULL DEFAULT '' CHECK (length(userId) <= 128),
            actor TEXT NOT NULL CHECK (length(actor) BETWEEN 1 AND 128),
            reason TEXT NOT NULL DEFAULT '' CHECK (length(reason) <= 128),
            email TEXT NOT NULL DEFAULT '' CHECK (length(CAST(email AS BLOB)) <= 320),
            ip TEXT NOT NULL DEFAULT '' CHECK (length(ip) <= 64),
            userAgent TEXT NOT NULL DEFAULT '' CHECK (length(CAST(userAgent AS BLOB)) <= 512),
            sessionId TEXT NOT NULL DEFAULT '' CHECK (length(sessionId) <= 128),
            detail TEXT NOT NULL DEFAULT '' CHECK (detail = '' OR (length(CAST(detail AS BLOB)) <= 4096 AND json_valid(detail)))
        ) STRICT;
        CREATE INDEX audit_log_user ON audit_log(userId, seq);
        CREATE INDEX audit_log_time ON audit_log(occurredAt);
        """

    /// The columns `createSQL` named in camelCase, and their names since: PostgreSQL's (for the
    /// migrations that rename them; frozen, as `createSQL`).
    public static let columnRenames: [(old: String, new: String)] = [
        ("occurredAt", "occurred_at"), ("userId", "user_id"), ("userAgent", "user_agent"), ("sessionId", "session_id"),
    ]

    /// Whether `db` has the table with this version's columns: false for a file that no service
    /// of this version has migrated yet (a reader of the file, which migrates nothing, says so).
    public static func isCurrent(in db: Database) throws -> Bool {
        try db.tableExists("audit_log") && db.columns(in: "audit_log").contains { $0.name == "occurred_at" }
    }

    /// Appends `event` (its `seq` is assigned) in the caller's transaction.
    public static func append(_ event: AuditEvent, in db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT INTO audit_log (occurred_at, kind, user_id, actor, reason, email, ip, user_agent, session_id, detail)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [
                event.occurredAt.millisecondsSince1970, event.kind, event.userID, event.actor, event.reason, event.email, event.ip,
                event.userAgent, event.sessionID, event.detailJSON,
            ])
    }

    /// The page `request` asks for (its limit already checked: 0 is `maxAuditPage`), in `seq`
    /// order; `nextAfterSeq` is the last listed `seq`, or the request's `afterSeq`.
    public static func page(_ request: ListAuditRequest, in db: Database) throws -> ListAuditResponse {
        var after = Int64(clamping: request.afterSeq)
        if let since = request.since {
            // Start at the first event of that time (the time index), not at the log's beginning.
            let first = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT min(seq) FROM audit_log WHERE occurred_at >= ?"), arguments: [since.millisecondsSince1970])
            guard let first else { return ListAuditResponse(events: [], nextAfterSeq: request.afterSeq) }
            after = max(after, first - 1)
        }
        var sql = "SELECT seq, occurred_at, kind, user_id, actor, reason, email, ip, user_agent, session_id, detail FROM audit_log WHERE seq > ?"
        var arguments: StatementArguments = [after]
        if !request.userID.isEmpty {
            sql += " AND user_id = ?"
            arguments += [request.userID]
        }
        if let since = request.since {
            sql += " AND occurred_at >= ?"
            arguments += [since.millisecondsSince1970]
        }
        sql += " ORDER BY seq LIMIT ?"
        arguments += [request.limit == 0 ? Int(maxAuditPage) : Int(request.limit)]
        let events = try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map { row in
            AuditEvent(
                seq: UInt64(row[0] as Int64), occurredAt: Date(millisecondsSince1970: row[1]), kind: row[2],
                userID: row[3], actor: row[4], reason: row[5], email: row[6], ip: row[7], userAgent: row[8], sessionID: row[9],
                detailJSON: row[10])
        }
        return ListAuditResponse(events: events, nextAfterSeq: events.last?.seq ?? request.afterSeq)
    }

    /// Deletes at most `batch` events that happened before `cutoff`, oldest first; how many went.
    public static func prune(before cutoff: Date, batch: Int, in db: Database) throws -> Int {
        try db.execute(
            sql: "DELETE FROM audit_log WHERE seq IN (SELECT seq FROM audit_log WHERE occurred_at < ? ORDER BY occurred_at LIMIT ?)",
            arguments: [cutoff.millisecondsSince1970, batch])
        return db.changesCount
    }
}
