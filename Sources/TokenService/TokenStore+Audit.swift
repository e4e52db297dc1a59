import Foundation
import GatehouseContracts
import GatehouseSupport
import GRDB

// The token service's audit log (issue 22 §3): `audit_log` in token.sqlite, the same shape as the
// identity service's, appended in the transaction (the group commit's savepoint) of the
// revocation it records: a sign-out, every session of a user, a refresh token's reuse.
extension TokenStore {
    /// Migration 0004: the audit log. `seq` is AUTOINCREMENT so a pruned position is never reused.
    static func registerAuditMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0004-audit-log") { db in
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

    /// Appends `event` (its `seq` is assigned) in the caller's transaction.
    static func appendAudit(_ event: AuditEvent, in db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT INTO audit_log (occurredAt, kind, userId, actor, reason, email, ip, userAgent, sessionId, detail)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [
                Self.ms(event.occurredAt), event.kind, event.userID, event.actor, event.reason, event.email, event.ip,
                event.userAgent.truncated(toUTF8Bytes: 512), event.sessionID, event.detailJSON,
            ])
    }

    /// The event of a revocation: `sessions.revoked` for several, else `session.revoked` (the
    /// reuse of a refresh token: `refresh_token.reused`). The actor is the user for what a user
    /// asks for (sign-outs, a reused token), `system` for what a change of the user caused.
    static func revocationEvent(_ sessions: [SessionRow], reason: String, at now: Date, all: Bool) -> AuditEvent? {
        guard let first = sessions.first else { return nil }
        let byUser: Set<String> = ["sign_out", "sign_out_everywhere", "refresh_token_reused"]
        let kind = reason == "refresh_token_reused"
            ? AuditEvent.Kind.refreshTokenReused : (all ? AuditEvent.Kind.sessionsRevoked : AuditEvent.Kind.sessionRevoked)
        return AuditEvent(
            occurredAt: now, kind: kind, userID: first.userID, actor: byUser.contains(reason) ? AuditEvent.Actor.user : AuditEvent.Actor.system,
            reason: reason, sessionID: all ? "" : first.id, detailJSON: all ? #"{"sessions":\#(sessions.count)}"# : "")
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
                arguments += [Self.ms(since)]
            }
            sql += " ORDER BY seq LIMIT ?"
            arguments += [limit]
            let events = try Row.fetchAll(db.cachedStatement(sql: sql), arguments: arguments).map { row in
                AuditEvent(
                    seq: UInt64(row[0] as Int64), occurredAt: Date(millisecondsSince1970: row[1]), kind: row[2], userID: row[3], actor: row[4],
                    reason: row[5], email: row[6], ip: row[7], userAgent: row[8], sessionID: row[9], detailJSON: row[10])
            }
            return (events, events.last?.seq ?? afterSeq)
        }
    }

    /// Deletes the events that happened before `cutoff`, at most `batch` a transaction. How many went.
    @discardableResult
    public func pruneAudit(before cutoff: Date, batch: Int = 5000) async throws -> Int {
        var deleted = 0
        while true {
            let count = try await write { db -> Int in
                try db.execute(
                    sql: "DELETE FROM audit_log WHERE seq IN (SELECT seq FROM audit_log WHERE occurredAt < ? ORDER BY occurredAt LIMIT ?)",
                    arguments: [Self.ms(cutoff), batch])
                return db.changesCount
            }
            deleted += count
            if count < batch { return deleted }
        }
    }
}
