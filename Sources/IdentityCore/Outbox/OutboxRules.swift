import Foundation
import Mail

/// What one delivery attempt of an outbox row writes (`OutboxRules`). A store applies it as one
/// update of the row, and only while the row is still queued (a row another worker finished
/// meanwhile is left as it is):
/// `state`, `attempts` and `lastError` are set; `nextAttemptAt`, `sentAt` and `message` replace
/// the stored values when set and keep them when nil.
public struct OutboxAttempt: Sendable, Equatable {
    /// Where the row goes.
    public enum State: String, Sendable {
        /// Queued again for `nextAttemptAt`.
        case queued
        /// Delivered at `sentAt`.
        case sent
        /// Never delivered: no more attempts.
        case dead
    }

    /// The row.
    public var id: Int64
    /// Its new state.
    public var state: State
    /// How many attempts were made.
    public var attempts: Int
    /// The last failure (at most `OutboxRules.maxErrorLength` characters, no NUL), nil once sent.
    public var lastError: String?
    /// When a queued row is tried again.
    public var nextAttemptAt: Date?
    /// When a sent row was delivered.
    public var sentAt: Date?
    /// The message as it is kept: its bodies blanked once it is sent or dead.
    public var message: MailMessage?

    /// An attempt of row `id` leaving it in `state`.
    public init(
        id: Int64, state: State, attempts: Int, lastError: String? = nil, nextAttemptAt: Date? = nil, sentAt: Date? = nil,
        message: MailMessage? = nil
    ) {
        self.id = id
        self.state = state
        self.attempts = attempts
        self.lastError = lastError
        self.nextAttemptAt = nextAttemptAt
        self.sentAt = sentAt
        self.message = message
    }
}

/// The outcome of delivering an outbox row, as the row records it: a mail's bodies (a reset code)
/// never outlive its delivery or its death in the database; the reason of a failure is kept short
/// and storable. The worker (`OutboxWorker`) decides when to retry; this decides what is written.
public enum OutboxRules {
    /// The longest failure reason kept.
    public static let maxErrorLength = 500

    /// Row `id` (holding `message`) delivered at `now` on attempt `attempts`.
    public static func sent(id: Int64, message: MailMessage, attempts: Int, at now: Date) -> OutboxAttempt {
        OutboxAttempt(id: id, state: .sent, attempts: attempts, sentAt: now, message: blanked(message))
    }

    /// Row `id` failed on attempt `attempts` with `error`: queued again for `nextAttemptAt`, or
    /// dead without one (its message, when known, blanked; an undecodable one stays as stored).
    public static func failed(id: Int64, message: MailMessage?, attempts: Int, error: String, nextAttemptAt: Date?) -> OutboxAttempt {
        let reason = storableReason(error)
        guard let nextAttemptAt else {
            return OutboxAttempt(id: id, state: .dead, attempts: attempts, lastError: reason, message: message.map(blanked))
        }
        return OutboxAttempt(id: id, state: .queued, attempts: attempts, lastError: reason, nextAttemptAt: nextAttemptAt)
    }

    /// `message` with its text and HTML bodies blanked (headers kept).
    public static func blanked(_ message: MailMessage) -> MailMessage {
        var blank = message
        blank.text = ""
        blank.html = nil
        return blank
    }

    /// `error` without NUL (a relay's reply could carry one; PostgreSQL text holds none) and cut
    /// to `maxErrorLength` characters.
    public static func storableReason(_ error: String) -> String {
        String(error.replacingOccurrences(of: "\u{0}", with: "").prefix(maxErrorLength))
    }
}
