import Foundation
import GatehouseContracts
import GRDB
import TokenPorts
import SQLiteSupport

// The token service's audit log (issue 22 §3): `audit_log` in token.sqlite, the same shape as the
// identity service's, appended in the transaction (the group commit's savepoint) of the
// revocation it records: a sign-out, every session of a user, a refresh token's reuse.
extension SQLiteTokenStore {
    /// Migration 0004: the audit log (`AuditLogTable`).
    static func registerAuditMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0004-audit-log") { db in try db.execute(sql: AuditLogTable.createSQL) }
    }

    /// Appends `event` (its `seq` is assigned) in the caller's transaction.
    static func appendAudit(_ event: AuditEvent, in db: Database) throws {
        try AuditLogTable.append(event, in: db)
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
