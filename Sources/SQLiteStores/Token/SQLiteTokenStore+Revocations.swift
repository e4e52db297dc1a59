import Foundation
import GatehouseContracts
import GRDB
import TokenPorts

extension SQLiteTokenStore {
    // MARK: Revocations

    /// `revokedSessions(since:)` reads the recent revocations through this partial index (only
    /// revoked sessions are in it), never the whole session table.
    static func registerRevokedAtIndex(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0003-session-revokedAt") { db in
            try db.execute(sql: "CREATE INDEX session_revokedAt ON session(revokedAt) WHERE revokedAt IS NOT NULL")
        }
    }

    /// Revokes every active session of a user but `except` (when given), in one transaction;
    /// returns those revoked. With `scrubClient` (the user was deleted), the client user agent and
    /// IP address of every session of the user, revoked before or now, are blanked in the same
    /// transaction: what is left is ids, timestamps, the user id and the reasons.
    public func revokeAll(
        userID: String, reason: String, at now: Date, except: String? = nil, scrubClient: Bool = false
    ) async throws -> [StoredSession] {
        try await write { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT * FROM session WHERE user_id = ? AND revoked_at IS NULL AND id IS NOT ?", arguments: [userID, except])
            try db.execute(
                sql: "UPDATE session SET revoked_at = ?, revoke_reason = ? WHERE user_id = ? AND revoked_at IS NULL AND id IS NOT ?",
                arguments: [Self.ms(now), reason, userID, except])
            if scrubClient {
                // The old values are overwritten in the file, not only unlinked.
                try db.execute(sql: "PRAGMA secure_delete = ON")
                defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
                try db.execute(
                    sql: "UPDATE session SET user_agent = '', ip = '' WHERE user_id = ? AND (user_agent != '' OR ip != '')", arguments: [userID])
            }
            let revoked = rows.map { row in
                var s = Self.session(row)
                s.revokedAt = now
                s.revokeReason = reason
                if scrubClient { s.client = ClientInfo() }
                return s
            }
            if let event = RevocationAudit.event(revoked, reason: reason, at: now, all: true) { try Self.appendAudit(event, in: db) }
            return revoked
        }
    }

    /// The sessions revoked after `since`, oldest first.
    public func revokedSessions(since: Date) async throws -> [RevokedSession] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT id, revoked_at FROM session WHERE revoked_at > ? ORDER BY revoked_at", arguments: [Self.ms(since)]
            ).map { row in RevokedSession(sessionID: row["id"], revokedAt: Self.date(row["revoked_at"])!) }
        }
    }

    /// The ids of `userID`'s sessions revoked after `since`.
    public func revokedSessionIDs(userID: String, since: Date) async throws -> [String] {
        try await read { db in
            try String.fetchAll(
                db, sql: "SELECT id FROM session WHERE user_id = ? AND revoked_at > ? ORDER BY revoked_at", arguments: [userID, Self.ms(since)])
        }
    }
}
