import Foundation
import GatehouseContracts
import IdentityPorts
import GatehouseSupport
import GRDB
import IdentityCore
import Mail
import Synchronization


/// An outbox row whose message JSON does not decode.
struct OutboxUndecodable: Error {
    let id: Int64
}


/// Delivery of the outbox (issue 19 part E2): the worker reads due rows, then records each
/// outcome in its own small write. A mail's body is blanked once it is sent (the row keeps its
/// headers for the record until the purge).
extension SQLiteUserStore {
    private static let entryColumns = "id, message, state, attempts, next_attempt_at, created_at, sent_at, last_error"

    /// Queued rows due at `now`, oldest due first, at most `limit`. One worker per database
    /// delivers them (the identity process owns its database); a crash between delivery and
    /// `recordOutboxAttempt` leaves the row queued, so it is delivered again with its Message-ID.
    /// A row whose stored message no longer decodes is marked dead rather than left in the way.
    public func dueOutbox(at now: Date, limit: Int) async throws -> [OutboxEntry] {
        let rows = try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT \(Self.entryColumns) FROM outbox WHERE state = 'queued' AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?",
                arguments: [now.millisecondsSince1970, limit]
            ).map { row -> Result<OutboxEntry, OutboxUndecodable> in
                Self.entry(row).map { .success($0) } ?? .failure(OutboxUndecodable(id: row["id"]))
            }
        }
        for case .failure(let bad) in rows {
            try await recordOutboxAttempt(
                OutboxRules.failed(id: bad.id, message: nil, attempts: 0, error: "the stored message does not decode", nextAttemptAt: nil))
        }
        return rows.compactMap { try? $0.get() }
    }

    /// Every outbox row, oldest first (tests, tools).
    public func outboxEntries() async throws -> [OutboxEntry] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.entryColumns) FROM outbox ORDER BY id").compactMap(Self.entry)
        }
    }

    /// The earliest `next_attempt_at` of a queued row, or nil when none waits.
    public func nextOutboxAttempt() async throws -> Date? {
        try await read { db in
            try Int64.fetchOne(db, sql: "SELECT MIN(next_attempt_at) FROM outbox WHERE state = 'queued'").map(Date.init(millisecondsSince1970:))
        }
    }

    /// Applies `attempt` (decided by `OutboxRules`) to its row while the row is still queued.
    public func recordOutboxAttempt(_ attempt: OutboxAttempt) async throws {
        let message = try attempt.message.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        try await run { db in
            try db.execute(
                sql: """
                    UPDATE outbox SET state = ?, attempts = ?, last_error = ?, next_attempt_at = coalesce(?, next_attempt_at),
                        sent_at = coalesce(?, sent_at), message = coalesce(?, message)
                    WHERE id = ? AND state = 'queued'
                    """,
                arguments: [
                    attempt.state.rawValue, attempt.attempts, attempt.lastError, attempt.nextAttemptAt?.millisecondsSince1970,
                    attempt.sentAt?.millisecondsSince1970, message, attempt.id,
                ])
        }
    }

    /// Deletes sent and dead rows enqueued before `cutoff`; returns how many.
    @discardableResult
    public func purgeOutbox(before cutoff: Date) async throws -> Int {
        try await run { db in
            try db.execute(
                sql: "DELETE FROM outbox WHERE state IN ('sent', 'dead') AND created_at < ?", arguments: [cutoff.millisecondsSince1970])
            return db.changesCount
        }
    }

    private static func entry(_ row: Row) -> OutboxEntry? {
        let json: String = row["message"]
        guard let message = try? JSONDecoder().decode(MailMessage.self, from: Data(json.utf8)) else { return nil }
        let sentAt: Int64? = row["sent_at"]
        return OutboxEntry(
            id: row["id"], message: message, state: row["state"], attempts: row["attempts"],
            nextAttemptAt: Date(millisecondsSince1970: row["next_attempt_at"]), createdAt: Date(millisecondsSince1970: row["created_at"]),
            sentAt: sentAt.map(Date.init(millisecondsSince1970:)), lastError: row["last_error"])
    }
}

extension SQLiteUserStore {
    /// Writes `message` into the outbox in a transaction of its own (tools and tests; the mail
    /// of a change goes through `enqueue(_:in:at:)` inside that change's transaction).
    public func enqueueMail(_ message: MailMessage, at now: Date) async throws {
        try await run { db in try Self.enqueue(message, in: db, at: now) }
    }
}
