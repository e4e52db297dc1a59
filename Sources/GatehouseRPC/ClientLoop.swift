import GatehouseContracts
import Logging
import ZeroMQ

/// The I/O thread of an `RPCClient`: receives replies, resumes the waiting callers, retries
/// requests the socket could not take at once, and fails calls past their deadline. Callers
/// send their requests themselves when the socket takes them without waiting; the socket is
/// shared with them only through `ClientSocket`'s lock.
final class ClientLoop {
    private let client: RPCClient.Core
    private let poller = Poller()
    private var commands: [RPCClient.Command] = []
    private var completions: [Completion] = []
    /// The PAIR socket the DEALER's monitor writes to (tcp and ipc; see `ClientSocket`).
    private let monitor: Socket?
    private let monitorFileDescriptor: Int32?

    /// A loop for `client`'s I/O thread; `monitor` reads the DEALER's connection events (nil on inproc).
    init(client: RPCClient.Core, monitor: Socket?) throws {
        self.client = client
        self.monitor = monitor
        self.monitorFileDescriptor = try monitor?.fileDescriptor
    }

    /// Serves the client until it is closed: connection events, replies, queued requests, deadlines.
    func run() {
        poller.add(fileDescriptor: client.socket.fileDescriptor, events: .readable)
        let signalIndex = poller.add(fileDescriptor: client.io.signal.fileDescriptor, events: .readable)
        let monitorIndex = monitorFileDescriptor.map { poller.add(fileDescriptor: $0, events: .readable) }
        let endpoint = client.configuration.endpoint
        var running = true
        var wakeAt: ContinuousClock.Instant?
        var moreToRead = true
        // Checked at start: a handshake may be done before the first poll.
        var monitorReady = true
        while running {
            if !moreToRead && client.io.prepareToSleep() {
                do {
                    _ = try poller.poll(timeoutMilliseconds: pollTimeout(until: wakeAt))
                } catch {
                    client.logger.error("rpc client poll failed: \(error)")
                    break
                }
                client.io.wokeUp(signalled: poller.readyEvents(at: signalIndex).contains(.readable))
                if let monitorIndex, poller.readyEvents(at: monitorIndex).contains(.readable) { monitorReady = true }
            }
            // Only when its descriptor said so: an empty check costs libzmq a poll(2). Events
            // that arrive meanwhile keep the descriptor readable until they are read.
            if monitorReady {
                monitorReady = false
                if !readConnectionEvents(endpoint: endpoint) { running = false }
            }
            client.io.take(into: &commands)
            for command in commands {
                switch command {
                case .wake: break
                case .stop: running = false
                case .job(let job): job.runSynchronously(on: client.executor.asUnownedTaskExecutor())
                }
            }
            commands.removeAll(keepingCapacity: true)
            let now = ContinuousClock.now
            do {
                let outcome = try client.socket.withLock { channel in
                    try channel.service(now: now, endpoint: endpoint, completions: &completions)
                }
                (moreToRead, wakeAt) = (outcome.moreToRead, outcome.wakeAt)
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
        // The channel stops the monitor before closing the DEALER; only then is its reader closed.
        let abandoned = client.socket.withLock { $0.close() }
        monitor?.close()
        for continuation in abandoned {
            continuation.resume(throwing: RPCError(.unavailable, "the client was closed"))
        }
        // Jobs queued before the queue closed (callers resumed just now among them) run on the
        // global executor from here on, like any enqueued later.
        client.io.close(into: &commands)
        for case .job(let job) in commands { globalConcurrentExecutor.enqueue(job) }
    }
}

extension ClientLoop {
    /// Reads the monitor's events until none is left and tells the channel; the replies that
    /// `connectionLost` reads are resumed with the others of this turn. Returns false when the
    /// socket failed.
    private func readConnectionEvents(endpoint: String) -> Bool {
        guard let monitor else { return true }
        do {
            while let event = try monitor.receiveEvent(dontWait: true) {
                if event.event == .handshakeSucceeded {
                    client.socket.withLock { $0.connectionUp() }
                    client.logger.debug("rpc client connected to \(endpoint)")
                } else if event.event == .disconnected {
                    let dropAt = try client.socket.withLock { channel in try channel.connectionLost(completions: &completions) }
                    client.logger.debug(
                        "rpc client lost its connection to \(endpoint)\(dropAt == nil ? "" : "; requests handed over keep waiting for a new one until the first of their deadlines")")
                }
            }
            return true
        } catch {
            client.logger.error("rpc client socket failed: \(error)")
            return false
        }
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
