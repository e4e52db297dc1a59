import Foundation
import Mail
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
import GRDB
import IdentityCore

// Sign in with Apple's server side (issue 20 §4): the refresh token Apple gave for a user's
// identity, sealed (AES-GCM; the store never sees it in the clear), and the queue of tokens to
// revoke at Apple. A token moves to the queue in the same transaction as what ends it: the
// user's deletion or the identity's unlinking (triggers); a newer token replaces it unrevoked.
// The queue is worked by `AppleRevocationWorker`, which retries with backoff: a deletion never
// waits for Apple.


extension SQLiteUserStore {
    /// Migration 0014: `apple_tokens` and `apple_revocations`, and the triggers that queue a
    /// user's tokens when the user is deleted or its Apple identity unlinked.
    static func registerAppleTokensMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0014-apple-tokens") { db in
            try db.execute(sql: """
                CREATE TABLE apple_tokens (
                    userId TEXT NOT NULL,
                    subject TEXT NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
                    clientId TEXT NOT NULL CHECK (length(clientId) BETWEEN 1 AND 255),
                    sealedToken BLOB NOT NULL CHECK (length(sealedToken) <= 4096),
                    createdAt INTEGER NOT NULL,
                    PRIMARY KEY (userId, subject)
                ) STRICT;
                CREATE TABLE apple_revocations (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    clientId TEXT NOT NULL,
                    sealedToken BLOB NOT NULL,
                    associatedData TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt INTEGER NOT NULL,
                    createdAt INTEGER NOT NULL
                ) STRICT;
                CREATE INDEX apple_revocations_due ON apple_revocations(nextAttemptAt);
                CREATE TRIGGER apple_tokens_user_deleted AFTER DELETE ON users
                BEGIN
                    INSERT INTO apple_revocations (clientId, sealedToken, associatedData, nextAttemptAt, createdAt)
                        SELECT clientId, sealedToken, userId || ' ' || subject, \(changeLogNowSQL), \(changeLogNowSQL)
                        FROM apple_tokens WHERE userId = OLD.id;
                    DELETE FROM apple_tokens WHERE userId = OLD.id;
                END;
                CREATE TRIGGER apple_revocations_identity_linked AFTER INSERT ON identities WHEN NEW.provider = 'apple.com'
                BEGIN
                    DELETE FROM apple_revocations WHERE substr(associatedData, instr(associatedData, ' ') + 1) = NEW.subject;
                END;
                CREATE TRIGGER apple_tokens_identity_unlinked AFTER DELETE ON identities WHEN OLD.provider = 'apple.com'
                BEGIN
                    INSERT INTO apple_revocations (clientId, sealedToken, associatedData, nextAttemptAt, createdAt)
                        SELECT clientId, sealedToken, userId || ' ' || subject, \(changeLogNowSQL), \(changeLogNowSQL)
                        FROM apple_tokens WHERE userId = OLD.userId AND subject = OLD.subject;
                    DELETE FROM apple_tokens WHERE userId = OLD.userId AND subject = OLD.subject;
                END;
                """)
        }
    }


    /// Keeps the sealed refresh token of the user's Apple identity `subject` while that identity
    /// is linked to the user, replacing (not revoking) an older one and dropping a revocation
    /// still queued for the Apple account, whichever user it was queued for (linking it again
    /// also does, by trigger). False (nothing stored) when the identity is not the user's
    /// (unlinked or deleted meanwhile).
    public func storeAppleToken(user: UserID, subject: String, clientID: String, sealed: Data, at: Date) async throws -> Bool {
        try await run { db in
            let linked = try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM identities WHERE provider = 'apple.com' AND subject = ? AND user_id = ?)",
                arguments: [subject, user.rawValue]) ?? false
            guard linked else { return false }
            let now = at.millisecondsSince1970
            // A newer token replaces the kept one, which is not revoked: revoking any token of an
            // Apple account ends the app's whole authorisation, the new token's too (Apple then
            // sends consent-revoked). For the same reason a revocation still queued for this
            // identity (an unlink, then a link again) is dropped.
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            try db.execute(
                sql: "DELETE FROM apple_revocations WHERE substr(associated_data, instr(associated_data, ' ') + 1) = ?",
                arguments: [subject])
            try db.execute(
                sql: "INSERT OR REPLACE INTO apple_tokens (user_id, subject, client_id, sealed_token, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [user.rawValue, subject, clientID, sealed, now])
            return true
        }
    }

    /// The revocations due at `now`, oldest first, at most `limit`.
    public func dueAppleRevocations(now: Date, limit: Int) async throws -> [PendingAppleRevocation] {
        try await read { db in
            try Row.fetchAll(
                db, sql: """
                    SELECT id, client_id, sealed_token, associated_data, attempts FROM apple_revocations
                    WHERE next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?
                    """, arguments: [now.millisecondsSince1970, limit]
            ).map { row in
                PendingAppleRevocation(id: row[0], clientID: row[1], sealedToken: row[2], associatedData: row[3], attempts: row[4])
            }
        }
    }

    /// Claims a due revocation right before it is sent: false when it is gone (the Apple account
    /// was linked again meanwhile, and revoking would end its new authorisation) or no longer
    /// due. The claim pushes its next attempt to `until`, so a worker that dies mid-call retries it then.
    public func claimAppleRevocation(id: Int64, now: Date, until: Date) async throws -> Bool {
        try await run { db in
            try db.execute(
                sql: "UPDATE apple_revocations SET next_attempt_at = ? WHERE id = ? AND next_attempt_at <= ?",
                arguments: [until.millisecondsSince1970, id, now.millisecondsSince1970])
            return db.changesCount == 1
        }
    }

    /// Removes a revocation that is done (or can never succeed).
    public func finishAppleRevocation(id: Int64) async throws {
        try await run { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            try db.execute(sql: "DELETE FROM apple_revocations WHERE id = ?", arguments: [id])
        }
    }

    /// Schedules another attempt of a revocation that failed.
    public func retryAppleRevocation(id: Int64, at next: Date) async throws {
        try await run { db in
            try db.execute(
                sql: "UPDATE apple_revocations SET attempts = attempts + 1, next_attempt_at = ? WHERE id = ?",
                arguments: [next.millisecondsSince1970, id])
        }
    }

}
