import Foundation
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import Mail
import PostgresNIO
import PostgresSupport
import Synchronization

// The outbox on PostgreSQL (issue 24): SQLite's `+Outbox` and `+OutboxDelivery`, with a claim per
// store instance on the rows its worker reads (see `PostgresUserStore+Mail`).
extension PostgresUserStore {
    // MARK: Outbox

    /// Writes `message` into the outbox, due at once, inside the caller's transaction (the one
    /// that makes the change the mail is about); `wake` wakes the worker after the commit.
    /// `invalidArgument` for a message with a header problem (`MailMessage.problem`).
    static func enqueue(
        _ message: MailMessage, on connection: PostgresConnection, at now: Date, wake: OutboxWake, logger: Logger
    ) async throws {
        if let problem = message.problem { throw IdentityError.invalidArgument(field: "mail", reason: problem) }
        let json = String(decoding: try JSONEncoder().encode(message), as: UTF8.self)
        let nowMs = now.millisecondsSince1970
        try await mailRows(
            """
            INSERT INTO outbox (message_id, kind, recipient, message, next_attempt_at, created_at)
            VALUES (\(message.messageID), \(message.kind), \(message.to), \(json), \(nowMs), \(nowMs))
            """, on: connection, logger: logger)
        wake.queued = true
    }

    /// Writes `message` into the outbox in a transaction of its own (tools and tests).
    public func enqueueMail(_ message: MailMessage, at now: Date) async throws {
        try await mailTransaction { connection, wake in
            try await Self.enqueue(message, on: connection, at: now, wake: wake, logger: self.queryLogger)
        }
    }

    /// This store instance's name in the outbox's claims: a token of the process and the
    /// instance's address (unique among the process's live stores).
    var outboxInstance: String { "\(Self.processToken)-\(UInt(bitPattern: ObjectIdentifier(self).hashValue))" }

    private static let processToken = UUID().uuidString

    private static let entryColumns = "id, message, state, attempts, next_attempt_at, created_at, sent_at, last_error"

    /// Queued rows due at `now`, oldest due first, at most `limit`, claimed for this instance's
    /// worker (`outboxClaim`): rows another instance's worker claimed and has not finished are
    /// skipped until their claim runs out, rows this instance claimed are read again. A row
    /// whose stored message no longer decodes is marked dead rather than left in the way.
    public func dueOutbox(at now: Date, limit: Int) async throws -> [OutboxEntry] {
        let nowMs = now.millisecondsSince1970
        let rows = try await transaction { connection in
            try await Self.mailRows(
                """
                WITH due AS (
                    SELECT id FROM outbox WHERE state = 'queued' AND next_attempt_at <= \(nowMs)
                        AND (claimed_until IS NULL OR claimed_until <= \(nowMs) OR claimed_by = \(self.outboxInstance))
                    ORDER BY next_attempt_at, id LIMIT \(max(0, limit)) FOR UPDATE SKIP LOCKED
                )
                UPDATE outbox SET claimed_by = \(self.outboxInstance), claimed_until = \(nowMs + Self.outboxClaim)
                FROM due WHERE outbox.id = due.id
                RETURNING outbox.id, outbox.message, outbox.state, outbox.attempts, outbox.next_attempt_at, outbox.created_at,
                    outbox.sent_at, outbox.last_error
                """, on: connection, logger: self.queryLogger
            ).map(Self.entry)
        }
        for case .failure(let bad) in rows {
            try await recordOutboxAttempt(
                OutboxRules.failed(id: bad.id, message: nil, attempts: 0, error: "the stored message does not decode", nextAttemptAt: nil))
        }
        return rows.compactMap { try? $0.get() }.sorted { ($0.nextAttemptAt, $0.id) < ($1.nextAttemptAt, $1.id) }
    }

    /// Every outbox row, oldest first (tests, tools); rows whose message does not decode are left out.
    public func outboxEntries() async throws -> [OutboxEntry] {
        try await run { connection in
            try await Self.mailRows("SELECT \(unescaped: Self.entryColumns) FROM outbox ORDER BY id", on: connection, logger: self.queryLogger)
                .map(Self.entry).compactMap { try? $0.get() }
        }
    }

    /// The earliest `next_attempt_at` of a queued row, or nil when none waits.
    public func nextOutboxAttempt() async throws -> Date? {
        try await run { connection in
            let next = try await Self.mailRows(
                "SELECT min(next_attempt_at) FROM outbox WHERE state = 'queued'", on: connection, logger: self.queryLogger
            ).first?.decode(Int64?.self) ?? nil
            return next.map(Date.init(millisecondsSince1970:))
        }
    }

    /// The number of outbox rows in `state` (tests and metrics).
    public func outboxCount(state: String) async throws -> Int {
        try await run { connection in
            try await Self.mailCount("SELECT count(*) FROM outbox WHERE state = \(state)", on: connection, logger: self.queryLogger)
        }
    }

    /// Applies `attempt` (decided by `OutboxRules`) to its row while the row is still queued,
    /// releasing its claim (any instance's worker may take a row queued again).
    public func recordOutboxAttempt(_ attempt: OutboxAttempt) async throws {
        let message = try attempt.message.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        let (state, attempts, next, sent) = (
            attempt.state.rawValue, Int64(attempt.attempts), attempt.nextAttemptAt?.millisecondsSince1970, attempt.sentAt?.millisecondsSince1970
        )
        _ = try await run { connection in
            try await Self.mailRows(
                """
                UPDATE outbox SET state = \(state), attempts = \(attempts), last_error = \(attempt.lastError),
                    next_attempt_at = coalesce(\(next), next_attempt_at), sent_at = coalesce(\(sent), sent_at),
                    message = coalesce(\(message), message), claimed_by = NULL, claimed_until = NULL
                WHERE id = \(attempt.id) AND state = 'queued'
                """, on: connection, logger: self.queryLogger)
        }
    }

    /// Deletes sent and dead rows enqueued before `cutoff`; how many.
    @discardableResult
    public func purgeOutbox(before cutoff: Date) async throws -> Int {
        try await run { connection in
            try await Self.mailCount(
                """
                WITH gone AS (DELETE FROM outbox WHERE state IN ('sent', 'dead') AND created_at < \(cutoff.millisecondsSince1970) RETURNING 1)
                SELECT count(*) FROM gone
                """, on: connection, logger: self.queryLogger)
        }
    }

    private static func entry(_ row: PostgresRow) throws -> Result<OutboxEntry, OutboxUndecodableRow> {
        let (id, json, state, attempts, next, created, sent, lastError) = try row.decode(
            (Int64, String, String, Int64, Int64, Int64, Int64?, String?).self)
        guard let message = try? JSONDecoder().decode(MailMessage.self, from: Data(json.utf8)) else {
            return .failure(OutboxUndecodableRow(id: id))
        }
        return .success(OutboxEntry(
            id: id, message: message, state: state, attempts: Int(attempts), nextAttemptAt: Date(millisecondsSince1970: next),
            createdAt: Date(millisecondsSince1970: created), sentAt: sent.map(Date.init(millisecondsSince1970:)), lastError: lastError))
    }

}

/// An outbox row whose message JSON does not decode.
struct OutboxUndecodableRow: Error {
    let id: Int64
}
