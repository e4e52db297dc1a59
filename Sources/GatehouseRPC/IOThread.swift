import Foundation
import GatehouseContracts
import Synchronization
import ZeroMQ
import GatehouseSupport

/// A dedicated thread that owns ZeroMQ sockets, and a queue of commands other threads hand it.
///
/// Sockets are created *on* this thread by the `body` closure and never leave it, so no socket
/// is ever touched by two threads. Other threads talk to it only through `submit`, which
/// enqueues under a lock and wakes the thread's poller through a `PollSignal`.
final class IOThread<Command: Sendable>: Sendable {
    let signal: PollSignal
    private let queue = Mutex<Queue>(Queue())
    private struct Queue {
        var commands: [Command] = []
        /// Set by `close(into:)`: the loop has ended and takes no more commands.
        var closed = false
    }
    private let signalled = Atomic<Bool>(false)
    private let finished = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    init() throws {
        signal = try PollSignal()
    }

    /// Starts the thread running `body`. `body` is `sending`: whatever it captures (the sockets)
    /// is moved to the new thread, and the compiler checks the caller keeps no access to it.
    func start(name: String, _ body: sending @escaping () -> Void) {
        let transfer = Transfer(body)
        let thread = Thread { [self] in
            ThreadName.set(name)
            transfer.take()()
            let waiters = finished.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.done = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// A thread name from an endpoint's last part: `inproc://token` → `prefix token`,
    /// `tcp://127.0.0.1:7011` → `prefix 7011`.
    static func threadName(_ prefix: String, endpoint: String) -> String {
        let tail = endpoint.split(whereSeparator: { $0 == "/" || $0 == ":" }).last.map(String.init) ?? endpoint
        return prefix + " " + tail
    }

    /// Hands `command` to the thread and wakes it. Safe from any thread or task.
    func submit(_ command: Command) {
        _ = submitIfOpen(command)
    }

    /// Hands `command` to the thread unless its loop has ended (`close(into:)`); returns whether
    /// it was queued. A command queued here is seen by the loop or by `close(into:)`, never lost.
    func submitIfOpen(_ command: Command) -> Bool {
        let queued = queue.withLock { queue -> Bool in
            if queue.closed { return false }
            queue.commands.append(command)
            return true
        }
        if queued && !signalled.exchange(true, ordering: .sequentiallyConsistent) {
            signal.signal()
        }
        return queued
    }

    /// On the I/O thread, as its loop ends: refuses further commands and takes those still queued.
    func close(into buffer: inout [Command]) {
        buffer.removeAll(keepingCapacity: true)
        queue.withLock { queue in
            queue.closed = true
            swap(&queue.commands, &buffer)
        }
    }

    /// On the I/O thread: takes every queued command, swapping buffers to avoid allocation.
    ///
    /// Order matters: the eventfd is cleared *before* the flag is reset, so a producer that sees
    /// the reset flag raises a signal that survives until the next poll (no lost wake-up).
    func drain(into buffer: inout [Command]) {
        signal.clear()
        signalled.store(false, ordering: .sequentiallyConsistent)
        buffer.removeAll(keepingCapacity: true)
        queue.withLock { swap(&$0.commands, &buffer) }
    }

    // MARK: Sleeping only when there is nothing to do
    //
    // A loop that wants to do its own work between polls (run jobs it queued to itself, keep
    // reading a busy socket) uses these three instead of `drain(into:)`. `signalled` then means
    // "the thread will look at the queue again before it sleeps": while it is awake, `submit`
    // costs no system call.

    /// On the I/O thread, right after a poll returned: marks the thread awake, so producers stop
    /// signalling until it prepares to sleep again, and consumes the wake-up if the poll saw it
    /// (`signalled`; a signal raised after the poll makes the next poll return at once, which
    /// costs a loop turn, never a lost command).
    func wokeUp(signalled wasSignalled: Bool) {
        signalled.store(true, ordering: .sequentiallyConsistent)
        if wasSignalled { signal.clear() }
    }

    /// On the I/O thread: takes every queued command without touching the wake-up state.
    func take(into buffer: inout [Command]) {
        buffer.removeAll(keepingCapacity: true)
        queue.withLock { swap(&$0.commands, &buffer) }
    }

    /// On the I/O thread, before it polls: returns `true` when it may sleep. From the moment the
    /// flag is reset, a producer raises the signal, so a command queued after the check below
    /// still wakes the poll; one queued before it is seen here and the thread stays awake.
    func prepareToSleep() -> Bool {
        signalled.store(false, ordering: .sequentiallyConsistent)
        if queue.withLock({ !$0.commands.isEmpty }) {
            signalled.store(true, ordering: .sequentiallyConsistent)
            return false
        }
        return true
    }

    /// Waits until the thread's body has returned.
    func join() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = finished.withLock { state -> Bool in
                if state.done { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}

/// A thread's command that can carry a task job to the thread (`IOLoopExecutor`).
protocol CarriesJobs: Sendable {
    static func job(_ job: UnownedJob) -> Self
}

/// Runs tasks on an I/O thread: jobs are queued as commands and run by its loop. Once the loop
/// has ended, jobs go to the global executor instead, so a task still running at shutdown is
/// never stranded in a queue nobody reads.
final class IOLoopExecutor<Command: CarriesJobs>: TaskExecutor {
    let io: IOThread<Command>
    init(io: IOThread<Command>) { self.io = io }
    /// Queues `job` for the loop, or runs it on the global executor once the loop has ended.
    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        if !io.submitIfOpen(.job(unowned)) {
            globalConcurrentExecutor.enqueue(unowned)
        }
    }
}

/// Milliseconds from now until `deadline`, clamped for `zmq_poll` (-1 = no deadline).
func pollTimeout(until deadline: ContinuousClock.Instant?, now: ContinuousClock.Instant = .now) -> Int {
    guard let deadline else { return -1 }
    if deadline <= now { return 0 }
    let remaining = now.duration(to: deadline)
    let ms = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
    return Int(min(ms + 1, 60_000))
}

/// Carries a value that was `sending` into a `@Sendable` closure. Sound only because its one
/// creator received the value as `sending` (no other reference exists) and it is taken once.
private final class Transfer<Value>: @unchecked Sendable {
    private var value: Value?
    init(_ value: sending Value) { self.value = value }
    func take() -> Value {
        defer { value = nil }
        return value!
    }
}
