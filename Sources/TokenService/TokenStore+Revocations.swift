import Foundation
import GatehouseContracts
import GRDB

extension TokenStore {
    // MARK: Revocations

    /// `revokedSessions(since:)` reads the recent revocations through this partial index (only
    /// revoked sessions are in it), never the whole session table.
    static func registerRevokedAtIndex(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0003-session-revokedAt") { db in
            try db.execute(sql: "CREATE INDEX session_revokedAt ON session(revokedAt) WHERE revokedAt IS NOT NULL")
        }
    }

    /// The sessions revoked after `since`, oldest first.
    public func revokedSessions(since: Date) async throws -> [RevokedSession] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT id, revokedAt FROM session WHERE revokedAt > ? ORDER BY revokedAt", arguments: [Self.ms(since)]
            ).map { row in RevokedSession(sessionID: row["id"], revokedAt: Self.date(row["revokedAt"])!) }
        }
    }

    /// The ids of `userID`'s sessions revoked after `since`.
    public func revokedSessionIDs(userID: String, since: Date) async throws -> [String] {
        try await read { db in
            try String.fetchAll(
                db, sql: "SELECT id FROM session WHERE userId = ? AND revokedAt > ? ORDER BY revokedAt", arguments: [userID, Self.ms(since)])
        }
    }
}
