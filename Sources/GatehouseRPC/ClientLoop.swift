import GatehouseProtocol
import Logging
import ZeroMQ

/// The I/O work of an `RPCClient`: receives replies, resumes the waiting callers, retries
/// requests the socket could not take at once, fails calls past their deadline, and runs jobs
/// of tasks on the client's executor. Callers send their requests themselves when the socket
/// takes them without waiting; the socket is shared with them only through `ClientSocket`'s lock.
///
/// It runs on a thread of its own (`run()`), or as part of a server's loop when the client
/// shares that server's thread (`RPCClient(configuration:sharing:)`): the host calls `turn()`
/// whenever it wakes, and `finish()` once.
final class ClientLoop: @unchecked Sendable {
    // @unchecked: handed to its thread (or host loop) once and used only there afterwards.
    let client: RPCClient.Core
    private var commands: [RPCClient.Command] = []
    private var completions: [Completion] = []
    /// More replies are waiting, or queued requests can be sent: do not sleep.
    private(set) var moreToDo = true
    /// When to wake at the latest (the earliest deadline of a waiting call).
    private(set) var wakeAt: ContinuousClock.Instant?
    /// False once `.stop` was seen or the socket failed.
    private(set) var running = true

    init(client: RPCClient.Core) {
        self.client = client
    }

    func run() {
        let poller = Poller()
        poller.add(fileDescriptor: client.socket.fileDescriptor, events: .readable)
        let signalIndex = poller.add(fileDescriptor: client.io.signal.fileDescriptor, events: .readable)
        while running {
            if !moreToDo && client.io.prepareToSleep() {
                do {
                    _ = try poller.poll(timeoutMilliseconds: pollTimeout(until: wakeAt))
                } catch {
                    client.logger.error("rpc client poll failed: \(error)")
                    break
                }
                client.io.wokeUp(signalled: poller.readyEvents(at: signalIndex).contains(.readable))
            }
            turn()
        }
        finish()
    }

    /// One turn: queued commands (jobs run here), then the socket, then the callers whose
    /// calls completed.
    func turn() {
        client.io.take(into: &commands)
        for command in commands {
            switch command {
            case .wake: break
            case .stop: running = false
            case .job(let job): job.runSynchronously(on: client.executor.asUnownedTaskExecutor())
            }
        }
        commands.removeAll(keepingCapacity: true)
        guard running else { return }
        let now = ContinuousClock.now
        do {
            let outcome = try client.socket.withLock { channel in
                try channel.service(now: now, endpoint: client.configuration.endpoint, completions: &completions)
            }
            (moreToDo, wakeAt) = (outcome.moreToRead, outcome.wakeAt)
            if outcome.malformedReplies > 0 {
                client.logger.warning("rpc client dropped \(outcome.malformedReplies) malformed replies")
            }
        } catch {
            client.logger.error("rpc client socket failed: \(error)")
            running = false
        }
        for completion in completions { completion.resume() }
        completions.removeAll(keepingCapacity: true)
    }

    /// Closes the socket and fails the calls still waiting. After this, jobs of tasks on the
    /// client's executor run on the global executor.
    func finish() {
        running = false
        let abandoned = client.socket.withLock { $0.close() }
        for continuation in abandoned {
            continuation.resume(throwing: RPCError(.unavailable, "the client was closed"))
        }
        // Jobs queued before the queue closed (callers resumed just now among them) run on the
        // global executor from here on, like any enqueued later.
        client.io.close(into: &commands)
        for case .job(let job) in commands { globalConcurrentExecutor.enqueue(job) }
        commands.removeAll()
    }
}

/// A first-in first-out queue on an array with a moving head (amortized O(1), no shifting).
struct FIFO<Element> {
    private var storage: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }
    var first: Element? { isEmpty ? nil : storage[head] }

    mutating func append(_ element: Element) { storage.append(element) }

    @discardableResult
    mutating func removeFirst() -> Element {
        let element = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }
}
