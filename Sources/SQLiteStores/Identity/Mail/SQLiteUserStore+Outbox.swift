import Foundation
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
import GRDB
import IdentityCore
import Mail

/// The mail outbox (issue 19): every mail is written into `outbox` in the same transaction as
/// the change that causes it, so a crash can neither send a mail for a change that did not
/// commit nor lose one for a change that did. A delivery worker sends what is `queued` and due.
extension SQLiteUserStore {
    /// Migration 0004: the outbox. `message` is the `MailMessage` as JSON (its body is blanked
    /// once sent); `state` is `queued`, `sent` or `dead` (past the attempts allowed).
    static func registerOutboxMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0004-outbox") { db in
            try db.execute(sql: """
                CREATE TABLE outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    messageId TEXT NOT NULL UNIQUE CHECK (length(messageId) BETWEEN 3 AND 256),
                    kind TEXT NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
                    recipient TEXT NOT NULL CHECK (length(CAST(recipient AS BLOB)) BETWEEN 3 AND 254),
                    message TEXT NOT NULL CHECK (length(CAST(message AS BLOB)) <= 262144),
                    state TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'sent', 'dead')),
                    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                    nextAttemptAt INTEGER NOT NULL,
                    createdAt INTEGER NOT NULL,
                    sentAt INTEGER,
                    lastError TEXT CHECK (lastError IS NULL OR length(lastError) <= 512)
                ) STRICT;
                CREATE INDEX outbox_due ON outbox(nextAttemptAt) WHERE state = 'queued';
                """)
        }
    }

    /// Writes `message` into the outbox, due at once, inside the caller's transaction `db` (the
    /// one that makes the change the mail is about). `invalidArgument` for a message with a
    /// header problem (`MailMessage.problem`).
    public static func enqueue(_ message: MailMessage, in db: Database, at now: Date) throws {
        if let problem = message.problem { throw IdentityError.invalidArgument(field: "mail", reason: problem) }
        let json = String(decoding: try JSONEncoder().encode(message), as: UTF8.self)
        // The delivery worker wakes once the change (and the mail with it) is committed.
        db.afterNextTransaction(onCommit: { _ in OutboxSignal.shared.fire() })
        try db.execute(
            sql: """
                INSERT INTO outbox (message_id, kind, recipient, message, next_attempt_at, created_at)
                VALUES (?, ?, ?, ?, ?, ?)
                """,
            arguments: [message.messageID, message.kind, message.to, json, now.millisecondsSince1970, now.millisecondsSince1970])
    }

    /// The number of outbox rows in `state` (for tests and metrics).
    public func outboxCount(state: String) async throws -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE state = ?", arguments: [state]) ?? 0 }
    }
}
