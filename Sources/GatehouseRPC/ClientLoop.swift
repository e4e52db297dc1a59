import GatehouseProtocol
import Logging
import ProtoCodec
import ZeroMQ

/// The I/O thread of an `RPCClient`: the only code that touches its DEALER socket.
final class ClientLoop {
    private let client: RPCClient.Core
    private let socket: Socket
    private let poller = Poller()
    private var commands: [RPCClient.Command] = []
    private var outbox = FIFO<(id: UInt64, header: [UInt8], body: [UInt8])>()
    private var unsent = Set<UInt64>()
    private var deadlines = DeadlineHeap()

    init(client: RPCClient.Core, socket: Socket) {
        self.client = client
        self.socket = socket
    }

    func run() {
        let socketIndex = poller.add(socket, events: .readable)
        poller.add(fileDescriptor: client.io.signal.fileDescriptor, events: .readable)
        var running = true
        while running {
            do {
                _ = try poller.poll(timeoutMilliseconds: pollTimeout(until: deadlines.earliest))
            } catch {
                client.logger.error("rpc client poll failed: \(error)")
                break
            }
            client.io.drain(into: &commands)
            for command in commands {
                switch command {
                case let .send(id, header, body, deadline):
                    outbox.append((id, header, body))
                    unsent.insert(id)
                    deadlines.insert(deadline, id)
                case .stop:
                    running = false
                }
            }
            do {
                try flush()
                try receiveReplies()
            } catch {
                client.logger.error("rpc client socket failed: \(error)")
                break
            }
            let now = ContinuousClock.now
            while let id = deadlines.popExpired(now: now) {
                if unsent.remove(id) != nil {
                    client.fail(id, RPCError(.unavailable, "no connection to \(client.configuration.endpoint)"))
                } else {
                    client.fail(id, RPCError(.deadlineExceeded, "no reply before the deadline"))
                }
            }
            poller.setEvents(outbox.isEmpty ? .readable : [.readable, .writable], at: socketIndex)
        }
        let abandoned = client.state.withLock { state -> [RPCClient.Pending] in
            state.closed = true
            defer { state.pending.removeAll() }
            return Array(state.pending.values)
        }
        for pending in abandoned {
            pending.continuation.resume(throwing: RPCError(.unavailable, "the client was closed"))
        }
        socket.close()
    }

    /// Sends queued requests until the socket would block (no connection, or high-water mark).
    private func flush() throws {
        while let next = outbox.first {
            guard client.isPending(next.id) else {
                // Cancelled or expired while queued.
                outbox.removeFirst()
                unsent.remove(next.id)
                continue
            }
            guard try socket.send(multipart: [next.header, next.body], dontWait: true) else { return }
            outbox.removeFirst()
            unsent.remove(next.id)
        }
    }

    private func receiveReplies() throws {
        // Bounded so a flood of replies cannot starve sending.
        for _ in 0..<1024 {
            guard let frames = try socket.receiveMultipart(dontWait: true) else { return }
            guard frames.count == 2, let header = try? ProtobufDecoder().decode(ReplyHeader.self, from: frames[0]) else {
                client.logger.warning("dropping a malformed reply (\(frames.count) frames)")
                continue
            }
            if let error = header.error {
                client.complete(header.requestID, .failure(error))
            } else {
                client.complete(header.requestID, .success(frames[1]))
            }
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
