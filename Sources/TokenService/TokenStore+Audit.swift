import Foundation
import GatehouseContracts
import GRDB
import SQLiteSupport

// The token service's audit log (issue 22 §3): `audit_log` in token.sqlite, the same shape as the
// identity service's, appended in the transaction (the group commit's savepoint) of the
// revocation it records: a sign-out, every session of a user, a refresh token's reuse.
extension TokenStore {
    /// Migration 0004: the audit log (`AuditLogTable`).
    static func registerAuditMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0004-audit-log") { db in try db.execute(sql: AuditLogTable.createSQL) }
    }

    /// Appends `event` (its `seq` is assigned) in the caller's transaction.
    static func appendAudit(_ event: AuditEvent, in db: Database) throws {
        try AuditLogTable.append(event, in: db)
    }

    /// The revocation reasons a user asks for (the others follow from a change of the user).
    private static let userReasons: Set<String> = ["sign_out", "sign_out_everywhere", "refresh_token_reused"]

    /// The event of a revocation: `sessions.revoked` for several, else `session.revoked` (the
    /// reuse of a refresh token: `refresh_token.reused`). The actor is the user for what a user
    /// asks for (sign-outs, a reused token), `system` for what a change of the user caused.
    /// Public so that every `TokenStorage` (`PostgresTokenStore`) records the same events.
    public static func revocationEvent(_ sessions: [SessionRow], reason: String, at now: Date, all: Bool) -> AuditEvent? {
        guard let first = sessions.first else { return nil }
        let kind = reason == "refresh_token_reused"
            ? AuditEvent.Kind.refreshTokenReused : (all ? AuditEvent.Kind.sessionsRevoked : AuditEvent.Kind.sessionRevoked)
        return AuditEvent(
            occurredAt: now, kind: kind, userID: first.userID, actor: userReasons.contains(reason) ? AuditEvent.Actor.user : AuditEvent.Actor.system,
            reason: reason, sessionID: all ? "" : first.id, detailJSON: all ? #"{"sessions":\#(sessions.count)}"# : "")
    }

    /// The page of the log `request` asks for (`AuditLogTable.page`).
    public func auditEvents(_ request: ListAuditRequest) async throws -> ListAuditResponse {
        try await read { db in try AuditLogTable.page(request, in: db) }
    }

    /// Deletes the events that happened before `cutoff`, at most `batch` a transaction. How many went.
    @discardableResult
    public func pruneAudit(before cutoff: Date, batch: Int = 5000) async throws -> Int {
        var deleted = 0
        while true {
            let count = try await write { db in try AuditLogTable.prune(before: cutoff, batch: batch, in: db) }
            deleted += count
            if count < batch { return deleted }
        }
    }
}
