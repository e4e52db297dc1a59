import Foundation
import GatehouseContracts
import GatehouseSupport
import NIOCore
import Prometheus
import Synchronization

/// Why a stream of `GET /v1/me/events` ended: the `closed` event's `reason`, and the label of
/// `gatehouse_event_streams_closed_total`. The last two end the connection without an event.
enum StreamCloseReason: String, CaseIterable, Sendable {
    case tooManyStreams = "too_many_streams"
    case tokenExpired = "token_expired"
    case shuttingDown = "shutting_down"
    case accountDeleted = "account_deleted"
    case accountDisabled = "account_disabled"
    case migrated
    case signedOut = "signed_out"
    case signedOutEverywhere = "signed_out_everywhere"
    case sessionRevoked = "session_revoked"
    /// The gateway lost changes it could not catch up on: resume with `Last-Event-ID`.
    case resync
    /// The client went away (or the stream could not start).
    case disconnected
    /// The client read too slowly: its queue passed `bufferBytes`; the connection is closed.
    case slowReader = "slow_reader"

    /// Whether reconnecting (with `Last-Event-ID`, and a fresh token for `token_expired`) makes sense.
    var resumable: Bool { self == .tokenExpired || self == .shuttingDown || self == .resync }

    /// What the client should do.
    var message: String {
        switch self {
        case .tooManyStreams: "This user opened too many event streams on this gateway; the oldest is closed."
        case .tokenExpired: "The access token expired: refresh it and reconnect with Last-Event-ID."
        case .shuttingDown: "The gateway is shutting down: reconnect with Last-Event-ID."
        case .accountDeleted: "The account was deleted."
        case .accountDisabled: "The account was disabled."
        case .migrated: "This anonymous account was merged into another account: sign in to it."
        case .signedOut: "This session was signed out."
        case .signedOutEverywhere: "Every session of this account was signed out."
        case .sessionRevoked: "This session was revoked: sign in again."
        case .resync: "Some changes could not be delivered: reconnect with Last-Event-ID."
        case .disconnected, .slowReader: ""
        }
    }

    /// The reason a stream ends for a revocation with the token service's `reason`.
    init(revocation reason: String) {
        switch reason {
        case "sign_out": self = .signedOut
        case "sign_out_everywhere": self = .signedOutEverywhere
        case "user_deleted": self = .accountDeleted
        case "user_disabled": self = .accountDisabled
        case "migrated": self = .migrated
        default: self = .sessionRevoked
        }
    }

    /// The reason a terminal change ends its user's streams; nil when `kinds` is not terminal.
    init?(terminal kinds: [String]) {
        if kinds.contains(UserChange.Kind.deleted) {
            self = .accountDeleted
        } else if kinds.contains(UserChange.Kind.migrated) {
            self = .migrated
        } else if kinds.contains(UserChange.Kind.disabled) {
            self = .accountDisabled
        } else {
            return nil
        }
    }
}

/// One open `GET /v1/me/events` stream: the bytes queued for its writer, the id of the last event
/// queued (events at or before it are dropped: no duplicates), and its token's expiry.
///
/// Until `start` (the snapshot or replay is written) live changes of its user are kept aside;
/// `start` queues those past the replay. The queue holds at most `limit` bytes (plus one event
/// when it is empty) while the connection takes no more bytes (the client does not read, and
/// NIO's own buffer is past its high-water mark): past it the stream is aborted (the connection
/// closed), so a client that does not read costs a bounded amount of memory. A burst for a
/// client that reads may queue up to four times the limit. One `Mutex`; no task or timer of its own.
final class EventStream: Sendable {
    /// Registration order in the hub (the oldest of a user is closed first).
    let id: UInt64
    let userID: String
    let sessionID: String
    let expiresAt: Date
    private let limit: Int
    private let metrics: StreamMetrics
    private let state: Mutex<State>

    private struct State {
        var live = false
        var early: [UserChange] = []
        var lastID: UInt64 = 0
        var pending: ByteBuffer
        /// A `closed` event is queued: the response ends once it is written.
        var ending = false
        /// Why the stream ended (set once).
        var reason: StreamCloseReason?
        var expiringSent = false
        /// Bytes of the start (snapshot or replay, up to a page of changes) still in `pending`:
        /// they are allowed on top of the limit, so a live change or a keep-alive that comes
        /// before the writer took a big replay does not cut off a client that has not had a
        /// chance to read yet.
        var startAllowance = 0
        var waiter: CheckedContinuation<ByteBuffer?, Never>?
        var onAbort: (@Sendable () -> Void)?
        /// Whether the connection takes more bytes now (its client is reading).
        var writable: (@Sendable () -> Bool)?
    }

    init(id: UInt64, userID: String, sessionID: String, expiresAt: Date, retryMs: Int, limit: Int, metrics: StreamMetrics) {
        self.id = id
        self.userID = userID
        self.sessionID = sessionID
        self.expiresAt = expiresAt
        self.limit = limit
        self.metrics = metrics
        state = Mutex(State(pending: ByteBuffer(string: "retry: \(retryMs)\n\n")))
    }

    /// The id of the last event queued, once live: every change after it will be sent.
    var position: UInt64? { state.withLock { $0.live && $0.reason == nil ? $0.lastID : nil } }

    /// Why the stream ended; nil while it is open.
    var endReason: StreamCloseReason? { state.withLock { $0.reason } }

    /// Binds the stream to its connection: `abort` runs (once) when the stream is aborted (it
    /// closes the connection); `writable` tells whether the connection takes more bytes now.
    func attach(abort: @escaping @Sendable () -> Void, writable: @escaping @Sendable () -> Bool) {
        state.withLock { s in
            s.onAbort = abort
            s.writable = writable
        }
    }

    // MARK: Producing

    /// Queues the first events (`identity.userChanges`'s reply) and goes live: the changes of
    /// its user that arrived meanwhile follow when newer than `reply.head`. Returns the reason
    /// when the stream ended (a terminal change in the replay).
    @discardableResult
    func start(_ reply: UserChangesResponse) -> StreamCloseReason? {
        var events: [(UInt64?, String, [UInt8])] = []
        var ended: StreamCloseReason?
        if let user = reply.user {
            var w = JSONObjectWriter()
            w.raw("user", user.publicView)
            w.bool("resync", reply.resync)
            events.append((reply.head, "snapshot", w.finish()))
        } else {
            // A `disabled` that a later `enabled` of the replay undid is history, not the end:
            // the user signed in again since.
            let lastToggle = reply.changes.lastIndex {
                $0.kinds.contains(UserChange.Kind.disabled) || $0.kinds.contains(UserChange.Kind.enabled)
            }
            for (index, change) in reply.changes.enumerated() {
                if let lastToggle, index < lastToggle, change.kinds.contains(UserChange.Kind.disabled),
                    !change.kinds.contains(UserChange.Kind.deleted), !change.kinds.contains(UserChange.Kind.migrated)
                {
                    events.append((change.seq, "change", Self.changeData(change)))
                    continue
                }
                events.append(Self.encode(change))
                if let reason = StreamCloseReason(terminal: change.kinds) {
                    ended = reason
                    break
                }
            }
        }
        // The changes kept aside are queued in the same critical section, so a live change that
        // comes meanwhile cannot overtake them.
        let count: Int = state.withLock { s in
            guard !s.ending, s.reason == nil else { return 0 }
            s.lastID = max(reply.head, reply.changes.last?.seq ?? 0, s.lastID)
            let early = s.early
            s.early = []
            for change in early where ended == nil && change.seq > s.lastID {
                s.lastID = change.seq
                events.append(Self.encode(change))
                ended = StreamCloseReason(terminal: change.kinds)
            }
            for (id, name, data) in events { Self.append(&s.pending, id: id, event: name, data: data) }
            s.startAllowance = s.pending.readableBytes
            if let ended {
                s.ending = true
                s.reason = ended
            } else {
                s.live = true
            }
            return events.count
        }
        metrics.eventsWritten.increment(by: Int64(count))
        wake()
        return endReason
    }

    /// A change as an event: `change`, or `closed` for a terminal one.
    static func encode(_ change: UserChange) -> (UInt64?, String, [UInt8]) {
        if let reason = StreamCloseReason(terminal: change.kinds) { return (change.seq, "closed", closedData(reason)) }
        return (change.seq, "change", changeData(change))
    }

    /// Queues a live change of the user (kept aside until `start`); drops one at or before the
    /// last id. Returns the reason when the stream ended (a terminal change, or a slow reader).
    @discardableResult
    func offer(_ change: UserChange) -> StreamCloseReason? {
        let terminal = StreamCloseReason(terminal: change.kinds)
        enum Outcome { case queue, keptAside, drop, ended, overflow }
        // Decided in one critical section: a `start` in between cannot make a kept-aside change
        // skip the last-id check.
        let outcome: Outcome = state.withLock { s in
            guard s.reason == nil, !s.ending else { return .ended }
            guard s.live else {
                // Bounded: a start that takes this long ends the stream (the client resumes).
                guard s.early.count < 1000 else { return .overflow }
                s.early.append(change)
                return .keptAside
            }
            guard change.seq > s.lastID else { return .drop }
            s.lastID = change.seq
            return .queue
        }
        switch outcome {
        case .ended: return endReason
        case .keptAside, .drop: return nil
        case .overflow:
            abort(.slowReader)
            return .slowReader
        case .queue: break
        }
        if let terminal { return close(terminal, id: change.seq) }
        return enqueue(Self.event(id: change.seq, event: "change", data: Self.changeData(change)), counts: true)
    }

    /// Queues `closed` with `reason` (and `id`, for a terminal change) and ends the stream after
    /// it. Returns the reason it ended for (an earlier one if it had already ended).
    @discardableResult
    func close(_ reason: StreamCloseReason, id: UInt64? = nil) -> StreamCloseReason {
        let outcome: StreamCloseReason? = state.withLock { s in
            if let earlier = s.reason { return earlier }
            Self.append(&s.pending, id: id, event: "closed", data: Self.closedData(reason))
            s.ending = true
            s.reason = reason
            return nil
        }
        if let outcome { return outcome }
        metrics.eventsWritten.increment()
        wake()
        return reason
    }

    /// A `: keep-alive` comment (not counted as an event); none while bytes wait to be written
    /// (they keep the connection busy anyway).
    func keepAlive() -> StreamCloseReason? {
        guard state.withLock({ $0.live && $0.pending.readableBytes == 0 }) else { return endReason }  // the snapshot comes first
        return enqueue(ByteBuffer(string: ": keep-alive\n\n"), counts: false)
    }

    /// `token_expiring` once the notice time is reached, `closed` (`token_expired`) at expiry.
    func checkExpiry(now: Date, notice: Duration) -> StreamCloseReason? {
        if now >= expiresAt { return close(.tokenExpired) }
        guard now >= expiresAt.addingTimeInterval(-notice.seconds) else { return nil }
        let first = state.withLock { s in
            guard s.live, !s.expiringSent else { return false }
            s.expiringSent = true
            return true
        }
        guard first else { return nil }
        var w = JSONObjectWriter()
        w.string("expiresAt", ISO8601.format(expiresAt))
        w.int("expiresIn", max(0, Int(expiresAt.timeIntervalSince(now).rounded(.up))))
        return enqueue(Self.event(id: nil, event: "token_expiring", data: w.finish()), counts: true)
    }

    /// Ends the stream at once, without an event: its writer stops and, with `closing`, the
    /// connection is closed (not when the request is answered with an error instead).
    func abort(_ reason: StreamCloseReason, closing: Bool = true) {
        let (waiter, action): (CheckedContinuation<ByteBuffer?, Never>?, (@Sendable () -> Void)?) = state.withLock { s in
            s.reason = s.reason ?? reason
            s.ending = true
            s.pending.clear()
            let waiter = s.waiter
            s.waiter = nil
            let action = closing ? s.onAbort : nil
            s.onAbort = nil
            return (waiter, action)
        }
        waiter?.resume(returning: nil)
        action?()
    }

    private func enqueue(_ bytes: ByteBuffer, counts: Bool) -> StreamCloseReason? {
        let overflow: Bool? = state.withLock { s in
            guard s.reason == nil, !s.ending else { return nil }
            let queued = s.pending.readableBytes + bytes.readableBytes - s.startAllowance
            if s.pending.readableBytes > 0, queued > limit {
                // Past the limit: a client that is not reading (its connection takes no more
                // bytes) is cut off; one that reads only saw a burst faster than the writer got
                // to run, which may queue up to four times the limit.
                if queued > 4 * limit || s.writable?() != true { return true }
            }
            var bytes = bytes
            s.pending.writeBuffer(&bytes)
            return false
        }
        switch overflow {
        case nil: return endReason
        case true?:
            abort(.slowReader)
            return .slowReader
        case false?:
            if counts { metrics.eventsWritten.increment() }
            wake()
            return nil
        }
    }

    private func wake() {
        let handoff: (CheckedContinuation<ByteBuffer?, Never>, ByteBuffer?)? = state.withLock { s in
            guard let waiter = s.waiter else { return nil }
            if s.pending.readableBytes > 0 {
                s.waiter = nil
                let chunk = s.pending
                s.startAllowance = 0
                s.pending = ByteBuffer()
                return (waiter, chunk)
            }
            guard s.ending else { return nil }
            s.waiter = nil
            return (waiter, nil)
        }
        if let (waiter, chunk) = handoff { waiter.resume(returning: chunk) }
    }

    // MARK: Consuming

    /// The bytes to write next, waiting for some; nil when the stream is over (after its
    /// `closed` event, or aborted, or when the task is cancelled).
    func next() async -> ByteBuffer? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ByteBuffer?, Never>) in
                let ready: ByteBuffer?? = state.withLock { s in
                    if s.pending.readableBytes > 0 {
                        let chunk = s.pending
                s.startAllowance = 0
                        s.pending = ByteBuffer()
                        return .some(chunk)
                    }
                    if s.ending { return .some(nil) }
                    s.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            abort(.disconnected)
        }
    }
}
