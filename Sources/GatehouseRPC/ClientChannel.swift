import GatehouseContracts
import GatehouseSupport
import Synchronization
import ZeroMQ

/// An `RPCClient`'s DEALER socket and the calls on it, behind one lock.
///
/// libzmq sockets must never be used by two threads at once. Here two kinds of thread use the
/// socket — a calling task sending its request directly (no hop to the I/O thread), and the
/// client's I/O thread receiving replies and retrying blocked sends — so the socket lives
/// inside a `Mutex` and is reachable only as a `private` property of `ClientChannel`, a
/// non-copyable value that exists only inside that mutex (its initializer is `fileprivate`,
/// and a non-copyable value cannot be copied out of `withLock`). Code outside this file can
/// only call `ClientChannel`'s methods from inside `withLock`, so every socket operation runs
/// under the lock: the compiler enforces it, not a comment. The socket is never handed out.
///
/// The I/O thread does not `zmq_poll` the socket (that would use it without the lock); it polls
/// the socket's `ZMQ_FD` (a plain descriptor, safe to wait on from any thread) and its wake-up
/// signal. `ZMQ_FD` is edge-triggered: any operation on the socket may consume the readiness
/// it signals. So every critical section that touches the socket ends by reading `ZMQ_EVENTS`,
/// and when a reply is waiting a caller wakes the I/O thread (the `needsWake` outcome).
///
/// Over tcp and ipc the socket does not use `ZMQ_IMMEDIATE`: with it, libzmq terminates a
/// connection's pipe at once when the connection drops, discarding replies that had arrived
/// but were not read yet (a server that answers and then shuts down loses its last replies).
/// The channel does what `ZMQ_IMMEDIATE` did itself: it hands requests to libzmq only while a
/// connection is up (a socket monitor tells the I/O thread, see `connectionUp` and
/// `connectionLost`), so a request made while the service is away waits in the outbox and
/// fails `unavailable` at its deadline instead of being delivered to a later server. Requests
/// handed over just before a connection dropped, which libzmq keeps for the next connection, are
/// dropped with libzmq's queue if no connection is back by the first of their deadlines.
final class ClientSocket: Sendable {
    private let channel: Mutex<ClientChannel>
    /// The socket's `ZMQ_FD`, for polling.
    let fileDescriptor: Int32

    /// Takes the socket, connected to `endpoint`; no other reference to it may exist
    /// (`sending`). `tracksConnection`: requests wait for `connectionUp` (tcp, ipc); without
    /// it they go to libzmq at once (inproc, where `ZMQ_IMMEDIATE` does the waiting).
    init(_ socket: sending Socket, endpoint: String, tracksConnection: Bool, failFastOnDisconnect: Bool = false) throws {
        fileDescriptor = try socket.fileDescriptor
        channel = Mutex(ClientChannel(
            socket: socket, endpoint: endpoint, connected: !tracksConnection, failFastOnDisconnect: failFastOnDisconnect))
    }

    /// Runs `body` with the channel, holding the lock.
    func withLock<R: Sendable>(_ body: (inout ClientChannel) throws -> R) rethrows -> R {
        try channel.withLock { channel in try body(&channel) }
    }
}

/// A reply or failure to hand to a waiting caller once the lock is released.
struct Completion: Sendable {
    var continuation: UnsafeContinuation<[UInt8], any Error>
    var result: Result<[UInt8], RPCError>

    func resume() {
        switch result {
        case .success(let body): continuation.resume(returning: body)
        case .failure(let error): continuation.resume(throwing: error)
        }
    }
}

/// What `ClientChannel.start` did with a call.
enum StartOutcome: Sendable {
    /// The client is closed; the call was not registered.
    case closed
    /// Registered (and sent, or queued). `wakeIOThread`: the I/O thread must look at the socket
    /// (a reply is waiting, the request is queued, or its deadline is earlier than the thread's).
    case started(wakeIOThread: Bool)
}

/// What `ClientChannel.service` found.
struct ServiceOutcome: Sendable {
    /// More replies are waiting, or queued requests can be sent: do not sleep.
    var moreToRead: Bool
    /// When to wake at the latest (the earliest deadline), nil: when signalled.
    var wakeAt: ContinuousClock.Instant?
    var malformedReplies: Int
}

/// The state guarded by `ClientSocket`'s lock. See `ClientSocket`.
struct ClientChannel: ~Copyable {
    private let socket: Socket
    private let endpoint: String
    /// Whether requests may be handed to libzmq: a connection is up (see `ClientSocket`).
    private var connected: Bool
    /// After a connection was lost: when to drop what libzmq still holds for it, unless a new
    /// connection is up by then (see `connectionLost`).
    private var dropQueueAt: ContinuousClock.Instant?
    private var closed = false
    private var pending: [UInt64: UnsafeContinuation<[UInt8], any Error>] = [:]
    /// Requests the socket could not take yet (no connection, or high-water mark).
    private var outbox = FIFO<(id: UInt64, header: [UInt8], body: [UInt8])>()
    private var unsent = Set<UInt64>()
    private var deadlines = DeadlineHeap()
    /// When the I/O thread next wakes on its own (nil: not before it is signalled). A call whose
    /// deadline is earlier must wake it, or nothing would fail the call on time.
    private var ioWakesAt: ContinuousClock.Instant?
    /// Malformed replies dropped during this `service` (the I/O thread logs them).
    private var malformedReplies = 0
    /// Calls handed to libzmq fail at once when their connection drops (see `connectionLost`).
    private let failFastOnDisconnect: Bool

    fileprivate init(socket: sending Socket, endpoint: String, connected: Bool, failFastOnDisconnect: Bool) {
        self.socket = socket
        self.endpoint = endpoint
        self.connected = connected
        self.failFastOnDisconnect = failFastOnDisconnect
        pending.reserveCapacity(256)
    }

    /// Whether a connection is up (always true over inproc).
    var isConnected: Bool { connected }

    // MARK: Callers

    /// Registers call `id` and sends its request now if the socket takes it without waiting,
    /// else queues it for the I/O thread.
    mutating func start(
        id: UInt64, header: RequestHeader, trace: TraceParent?, body: [UInt8], deadline: ContinuousClock.Instant,
        continuation: UnsafeContinuation<[UInt8], any Error>
    ) -> StartOutcome {
        if closed { return .closed }
        pending[id] = continuation
        deadlines.insert(deadline, id)
        var wake = false
        if ioWakesAt.map({ deadline < $0 }) ?? true {
            ioWakesAt = deadline
            wake = true
        }
        var sent = false
        if outbox.isEmpty && connected {
            // An error here (the context is terminating) is left to the I/O thread, which meets it too.
            sent = (try? sendNow(header: header, trace: trace, body: body)) ?? false
        }
        if !sent {
            outbox.append((id, header.encoded(trace: trace), body))
            unsent.insert(id)
            wake = true
        }
        // This send consumed any ZMQ_FD edge: a waiting reply, or a queue that can move again,
        // is the I/O thread's to handle, so wake it.
        if let events = try? socket.events {
            if events.readable || (events.writable && connected && !outbox.isEmpty) { wake = true }
        } else {
            wake = true
        }
        return .started(wakeIOThread: wake)
    }

    private func sendNow(header: RequestHeader, trace: TraceParent?, body: [UInt8]) throws -> Bool {
        let first = try header.withEncoded(trace: trace) { try socket.send($0, more: true, dontWait: true) }
        guard first else { return false }
        // Once the first frame is queued, libzmq takes the rest of the message.
        try socket.send(body, more: false, dontWait: true)
        return true
    }

    /// Forgets call `id`; returns its continuation if it was still waiting.
    mutating func remove(_ id: UInt64) -> UnsafeContinuation<[UInt8], any Error>? {
        pending.removeValue(forKey: id)
    }

    /// Calls waiting for a reply.
    var pendingCount: Int { pending.count }

    /// Requests waiting in the outbox (not handed to libzmq yet).
    var unsentCount: Int { unsent.count }

    // MARK: The I/O thread

    /// Sends what was queued, receives replies, expires calls past their deadline. Completions
    /// are appended to `completions` for the caller to resume after releasing the lock. Returns
    /// whether more replies are waiting (do not sleep) and when to wake at the latest.
    mutating func service(
        now: ContinuousClock.Instant, endpoint: String, completions: inout [Completion]
    ) throws -> ServiceOutcome {
        if let at = dropQueueAt, at <= now {
            try dropQueue()
        }
        try flush()
        try receiveReplies(into: &completions)
        while let id = deadlines.popExpired(now: now) {
            let wasUnsent = unsent.remove(id) != nil
            guard let continuation = pending.removeValue(forKey: id) else { continue }
            let error = wasUnsent
                ? RPCError(.unavailable, "no connection to \(endpoint)")
                : RPCError(.deadlineExceeded, "no reply before the deadline")
            completions.append(Completion(continuation: continuation, result: .failure(error)))
        }
        // Entries of calls that already finished (answered, cancelled) are dropped from the top,
        // so the next wake-up is the deadline of a call still waiting. Left in place, they made
        // the I/O thread wake about every millisecond under load just to expire them.
        while let id = deadlines.earliestID, pending[id] == nil { deadlines.removeEarliest() }
        // Reading ZMQ_EVENTS consumes the ZMQ_FD edge: whatever it reports (a reply waiting, or
        // the socket writable again while requests are queued) must be acted on before sleeping.
        let events = try socket.events
        // The earlier of the two, without an array per pass (this runs for every batch of replies).
        if let earliest = deadlines.earliest, let drop = dropQueueAt { ioWakesAt = min(earliest, drop) } else { ioWakesAt = deadlines.earliest ?? dropQueueAt }
        defer { malformedReplies = 0 }
        let moreToDo = events.readable || (events.writable && connected && !outbox.isEmpty)
        return ServiceOutcome(moreToRead: moreToDo, wakeAt: ioWakesAt, malformedReplies: malformedReplies)
    }

    /// Sends queued requests until the socket would block (none while no connection is up).
    private mutating func flush() throws {
        guard connected else { return }
        while let next = outbox.first {
            guard pending[next.id] != nil else {
                // Cancelled or expired while queued.
                outbox.removeFirst()
                unsent.remove(next.id)
                continue
            }
            guard try socket.send(next.header, more: true, dontWait: true) else { return }
            try socket.send(next.body, more: false, dontWait: true)
            outbox.removeFirst()
            unsent.remove(next.id)
        }
    }

    /// Reads up to 1024 replies (bounded so a flood cannot starve sending); returns whether it
    /// stopped at the bound with more perhaps waiting.
    @discardableResult
    private mutating func receiveReplies(into completions: inout [Completion]) throws -> Bool {
        for _ in 0..<1024 {
            // Header frame, read in place.
            guard let (header, more) = try socket.receive(dontWait: true, { bytes, more in
                (try? ReplyHeader.decode(bytes), more)
            }) else { return false }
            var frames = 1
            var body: [UInt8] = []
            var hasMore = more
            while hasMore {
                guard let (bytes, next) = try socket.receive(dontWait: false) else { break }
                if frames == 1 { body = bytes }
                frames += 1
                hasMore = next
            }
            guard frames == 2, let header else {
                malformedReplies += 1
                continue
            }
            guard let continuation = pending.removeValue(forKey: header.requestID) else { continue }
            if let error = header.error {
                completions.append(Completion(continuation: continuation, result: .failure(error)))
            } else {
                completions.append(Completion(continuation: continuation, result: .success(body)))
            }
        }
        return true
    }

    // MARK: The connection (tcp, ipc)

    /// The monitor saw a handshake succeed: requests may go to libzmq (`service` sends the
    /// outbox), and libzmq sends what it kept from the lost connection, all within its deadlines.
    mutating func connectionUp() {
        connected = true
        dropQueueAt = nil
    }

    /// The monitor saw the connection drop. Reads every reply that arrived before it (they stay
    /// readable: no `ZMQ_IMMEDIATE`); from now on requests wait in the outbox.
    ///
    /// Without `ZMQ_IMMEDIATE` libzmq keeps the requests it had not written yet, and those handed
    /// to it before this event was seen, and sends them to whichever server answers next. That
    /// is right while their callers still wait (a restarted service answers them), wrong after:
    /// so if no connection is up by the first of their deadlines, `service` drops libzmq's queue
    /// (`dropQueue`). Returns the time it will, if any request was handed over unanswered.
    ///
    /// With `failFastOnDisconnect` (a member of a `BalancedRPCClient`, which has other instances
    /// to go to) the calls handed over fail at once with `unavailable`, and libzmq's queue is
    /// dropped at the next turn, so none of them reaches a later server.
    mutating func connectionLost(completions: inout [Completion]) throws -> ContinuousClock.Instant? {
        while try receiveReplies(into: &completions) {}
        guard connected else { return nil }
        connected = false
        if failFastOnDisconnect {
            for (id, continuation) in pending where !unsent.contains(id) {
                completions.append(Completion(
                    continuation: continuation,
                    result: .failure(RPCError(.unavailable, "the connection to \(endpoint) was lost; the call may have run"))))
            }
            pending = pending.filter { unsent.contains($0.key) }
            dropQueueAt = .now
            return dropQueueAt
        }
        dropQueueAt = deadlines.earliest { [pending, unsent] id in pending[id] != nil && !unsent.contains(id) }
        return dropQueueAt
    }

    /// Disconnects and connects again: libzmq forgets the lost connection's queue (linger 0) and
    /// starts a new one. The calls whose requests it held fail at their deadline, as calls on a
    /// lost connection do.
    private mutating func dropQueue() throws {
        dropQueueAt = nil
        guard !connected else { return }
        // Unknown endpoint (ENOENT) cannot happen for one this socket connected; either way the
        // connect below gives a fresh queue.
        try? socket.disconnect(endpoint)
        try socket.connect(endpoint)
    }

    /// Closes the socket; returns the calls still waiting.
    mutating func close() -> [UnsafeContinuation<[UInt8], any Error>] {
        closed = true
        // Before the I/O thread closes the monitor's reader (see `Socket.monitor`).
        socket.stopMonitor()
        socket.close()
        defer { pending.removeAll() }
        return Array(pending.values)
    }
}
