import Foundation
import GRDB
import GatehouseContracts
import GatehouseSupport

// The identity service's audit log (issue 22 §3): `audit_log`, appended in the transaction of the
// change it records (`SQLiteUserStore.run` takes the running call's `AuditRecorder`), read by
// `identity.listAudit`, pruned by retention.
extension SQLiteUserStore {
    /// Migration 0011: the audit log. `seq` is AUTOINCREMENT so a pruned position is never reused.
    static func registerAuditMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0011-audit-log") { db in
            try db.execute(sql: """
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
                """)
        }
    }

    static let appendAuditSQL = """
        INSERT INTO audit_log (occurredAt, kind, userId, actor, reason, email, ip, userAgent, sessionId, detail)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Appends `event` (its `seq` is assigned) in the caller's transaction.
    static func appendAudit(_ event: AuditEvent, in db: Database) throws {
        try db.cachedStatement(sql: appendAuditSQL).execute(arguments: [
            event.occurredAt.millisecondsSince1970, event.kind, event.userID, event.actor, event.reason, event.email, event.ip,
            event.userAgent, event.sessionID, event.detailJSON,
        ])
    }

    /// Appends `events` in one transaction of their own (events with no change of this store).
    public func appendAudit(_ events: [AuditEvent]) async throws {
        try await run { db in for event in events { try Self.appendAudit(event, in: db) } }
    }

    /// Up to `limit` events after `afterSeq`, of `userID` ("" for all), not before `since`, in
    /// `seq` order; and the position to continue after (the last one listed, or `afterSeq`).
    public func auditEvents(after afterSeq: UInt64, userID: String, since: Date?, limit: Int) async throws -> ([AuditEvent], UInt64) {
        try await read { db in
            var sql = "SELECT seq, occurredAt, kind, userId, actor, reason, email, ip, userAgent, sessionId, detail FROM audit_log WHERE seq > ?"
            var arguments: StatementArguments = [Int64(clamping: afterSeq)]
            if !userID.isEmpty {
                sql += " AND userId = ?"
                arguments += [userID]
            }
            if let since {
                sql += " AND occurredAt >= ?"
                arguments += [since.millisecondsSince1970]
            }
            sql += " ORDER BY seq LIMIT ?"
            arguments += [limit]
            let events = try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map(Self.auditEvent)
            return (events, events.last?.seq ?? afterSeq)
        }
    }

    /// Deletes the events that happened before `cutoff`, at most `batch` a transaction, with
    /// `secure_delete` on (they name addresses). How many went.
    @discardableResult
    public func pruneAudit(before cutoff: Date, batch: Int = 5000) async throws -> Int {
        let cutoffMs = cutoff.millisecondsSince1970
        var deleted = 0
        while true {
            let count = try await run { db -> Int in
                try db.execute(sql: "PRAGMA secure_delete = ON")
                defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
                try db.execute(
                    sql: "DELETE FROM audit_log WHERE seq IN (SELECT seq FROM audit_log WHERE occurredAt < ? ORDER BY occurredAt LIMIT ?)",
                    arguments: [cutoffMs, batch])
                return db.changesCount
            }
            deleted += count
            if count < batch { return deleted }
        }
    }

    private static func auditEvent(_ row: Row) -> AuditEvent {
        AuditEvent(
            seq: UInt64(row[0] as Int64), occurredAt: Date(millisecondsSince1970: row[1]), kind: row[2], userID: row[3], actor: row[4],
            reason: row[5], email: row[6], ip: row[7], userAgent: row[8], sessionID: row[9], detailJSON: row[10])
    }
}
