import Foundation
import Mail
import GatehouseSupport
import IdentityCore
import IdentityPorts
import GRDB
import GatehouseContracts
import SQLiteSupport

// The identity service's audit log (issue 22 §3): `audit_log` (`AuditLogTable`), appended in the
// transaction of the change it records (`SQLiteUserStore.run` takes the running call's
// `AuditRecorder`), read by `identity.listAudit`, pruned by retention.
extension SQLiteUserStore {
    /// Migration 0011: the audit log.
    static func registerAuditMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0011-audit-log") { db in try db.execute(sql: AuditLogTable.createSQL) }
    }

    /// Appends `event` (its `seq` is assigned) in the caller's transaction.
    static func appendAudit(_ event: AuditEvent, in db: Database) throws {
        try AuditLogTable.append(event, in: db)
    }

    /// The page of the log `request` asks for (`AuditLogTable.page`).
    public func auditEvents(_ request: ListAuditRequest) async throws -> ListAuditResponse {
        try await read { db in try AuditLogTable.page(request, in: db) }
    }

    /// Deletes the events that happened before `cutoff`, at most `batch` a transaction, with
    /// `secure_delete` on (they name addresses). How many went.
    @discardableResult
    public func pruneAudit(before cutoff: Date, batch: Int) async throws -> Int {
        var deleted = 0
        while true {
            let count = try await run { db -> Int in
                try db.execute(sql: "PRAGMA secure_delete = ON")
                defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
                return try AuditLogTable.prune(before: cutoff, batch: batch, in: db)
            }
            deleted += count
            if count < batch { return deleted }
        }
    }
}
