#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

// The loop thread's side of a request: one keep-alive connection per request in flight, from
// connect through write, read and parse to the answer, the timeout or the close.
extension EventLoopThread {
    // MARK: Requests (loop thread)

    /// Writes `request` on an idle connection (or a new one) and waits for its response.
    func send(_ request: [UInt8], to address: SocketAddress, timeoutNanos: UInt64, maxBody: Int) async throws -> (status: Int, body: [UInt8]) {
        // A task prefers this loop's executor, so it runs here; only once the loop has ended are
        // its jobs sent to the global executor instead.
        guard isCurrent, !ended else {
            throw LoopHTTPClient.Failure(kind: .connectionClosed, description: "the load generator stopped")
        }
        var connection: Connection?
        while let candidate = idle.popLast() {
            if connections[candidate.fd] === candidate { connection = candidate; break }
        }
        if connection == nil { connection = try open(address, maxBody: maxBody) }
        let chosen = connection!
        return try await withUnsafeThrowingContinuation { continuation in
            chosen.continuation = continuation
            chosen.deadline = Self.now() + timeoutNanos
            chosen.outgoing = request
            chosen.written = 0
            inFlight += 1
            if chosen.state == .idle {
                chosen.state = .busy
                flush(chosen)
            }
            // A connection still connecting writes once it is connected (`handle`).
        }
    }

    private func open(_ address: SocketAddress, maxBody: Int) throws -> Connection {
        #if canImport(Darwin)
        let fd = socket(address.family, SOCK_STREAM, 0)
        #else
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #endif
        guard fd >= 0 else { throw LoopHTTPClient.Failure(kind: .connect, description: "socket: \(String(cString: strerror(errno)))") }
        #if canImport(Darwin)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var noDelay: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        var storage = address.storage
        let code = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, address.length) }
        }
        let connection = Connection(fd: fd, maxBody: maxBody)
        if code == 0 {
            connection.state = .idle
        } else if errno == EINPROGRESS {
            connection.state = .connecting
        } else {
            let reason = String(cString: strerror(errno))
            closeDescriptor(fd)
            throw LoopHTTPClient.Failure(kind: .connect, description: "connect: \(reason)")
        }
        connections[fd] = connection
        poller.add(fd, writable: connection.state == .connecting)
        connection.watchingWrites = connection.state == .connecting
        return connection
    }

    func handle(_ connection: Connection, _ event: PollEvent) {
        if connection.state == .connecting {
            guard event.writable || event.failed else { return }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(connection.fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 {
                finish(connection, .failure(LoopHTTPClient.Failure(kind: .connect, description: "connect: \(String(cString: strerror(error)))")))
                return
            }
            connection.state = connection.continuation == nil ? .idle : .busy
            if connection.state == .busy { flush(connection) } else { watchWrites(connection, false) }
            return
        }
        if event.writable, connection.watchingWrites { flush(connection) }
        if connections[connection.fd] !== connection { return }
        if event.readable || event.failed { receive(connection) }
    }

    /// Writes what is left of the request; watches for writability if the socket is full.
    private func flush(_ connection: Connection) {
        while connection.written < connection.outgoing.count {
            let count = connection.outgoing.withUnsafeBytes { raw in
                Self.sendBytes(connection.fd, raw.baseAddress! + connection.written, raw.count - connection.written)
            }
            if count > 0 {
                connection.written += count
                continue
            }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                watchWrites(connection, true)
                return
            }
            finish(connection, .failure(LoopHTTPClient.Failure(kind: .connectionClosed, description: "write: \(String(cString: strerror(errno)))")))
            return
        }
        watchWrites(connection, false)
    }

    private static func sendBytes(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Darwin)
        return Darwin.send(fd, pointer, count, 0)
        #else
        return Glibc.send(fd, pointer, count, Int32(MSG_NOSIGNAL))
        #endif
    }

    private func watchWrites(_ connection: Connection, _ on: Bool) {
        guard connection.watchingWrites != on else { return }
        connection.watchingWrites = on
        poller.modify(connection.fd, writable: on)
    }

    private func receive(_ connection: Connection) {
        var closed = false
        while true {
            let count = readBuffer.withUnsafeMutableBytes { read(connection.fd, $0.baseAddress!, $0.count) }
            if count > 0 {
                if connection.continuation == nil {
                    // Bytes nobody asked for on an idle connection: not reusable.
                    close(connection)
                    return
                }
                connection.inbound.append(contentsOf: readBuffer[0..<count])
                if count < readBuffer.count { break }
                continue
            }
            if count == 0 {
                closed = true
                break
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { break }
            if connection.continuation == nil {
                close(connection)
            } else {
                finish(connection, .failure(LoopHTTPClient.Failure(kind: .connectionClosed, description: "read: \(String(cString: strerror(errno)))")))
            }
            return
        }
        guard connection.continuation != nil else {
            // An idle connection the server closed.
            if closed { close(connection) }
            return
        }
        let outcome = connection.inbound.withUnsafeBufferPointer { connection.parser.parse($0, closed: closed) }
        switch outcome {
        case .needMore:
            return
        case .complete(let response):
            // Reused only in a clean state: the whole request written (a server may answer early)
            // and nothing received past this response.
            let reusable = response.keepAlive && !closed && response.consumed == connection.inbound.count
                && connection.written == connection.outgoing.count
            finish(connection, .success((response.status, response.body)), reusable: reusable)
        case .failed(let failure):
            let error: LoopHTTPClient.Failure
            switch failure {
            case .bodyTooLarge: error = .init(kind: .bodyTooLarge, description: "response body over \(connection.parser.maxBody) bytes")
            case .headTooLarge: error = .init(kind: .protocolError, description: "response head over \(connection.parser.maxHead) bytes")
            case .malformed(let reason) where closed && connection.inbound.isEmpty:
                error = .init(kind: .connectionClosed, description: "the server closed the connection (\(reason))")
            case .malformed(let reason): error = .init(kind: closed ? .connectionClosed : .protocolError, description: reason)
            }
            finish(connection, .failure(error))
        }
    }

    /// Answers the connection's waiting request; keeps the connection for the next one only
    /// when `reusable`.
    func finish(_ connection: Connection, _ result: Result<(Int, [UInt8]), LoopHTTPClient.Failure>, reusable: Bool = false) {
        guard let continuation = connection.continuation else {
            close(connection)
            return
        }
        connection.continuation = nil
        connection.outgoing = []
        inFlight -= 1
        if reusable {
            connection.inbound.removeAll(keepingCapacity: true)
            connection.parser.reset()
            connection.state = .idle
            idle.append(connection)
        } else {
            close(connection)
        }
        switch result {
        case .success(let response): continuation.resume(returning: (status: response.0, body: response.1))
        case .failure(let failure): continuation.resume(throwing: failure)
        }
    }

    func close(_ connection: Connection) {
        guard connections[connection.fd] === connection else { return }
        connections[connection.fd] = nil
        poller.remove(connection.fd)
        closeDescriptor(connection.fd)
        connection.state = .closed
    }

    func expireTimeouts() {
        let now = Self.now()
        guard now >= nextTimeoutScan else { return }
        nextTimeoutScan = now + 2_000_000
        for connection in Array(connections.values) where connection.continuation != nil && connection.deadline <= now {
            finish(connection, .failure(LoopHTTPClient.Failure(kind: .timeout, description: "no response within the timeout")))
        }
    }

    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// One keep-alive connection (loop thread only).
    final class Connection {
        enum State { case connecting, idle, busy, closed }
        let fd: Int32
        var state = State.connecting
        var continuation: UnsafeContinuation<(status: Int, body: [UInt8]), any Error>?
        var deadline: UInt64 = 0
        var outgoing: [UInt8] = []
        var written = 0
        var inbound: [UInt8] = []
        var parser: HTTPResponseParser
        var watchingWrites = false

        init(fd: Int32, maxBody: Int) {
            self.fd = fd
            self.parser = HTTPResponseParser(maxBody: maxBody)
            inbound.reserveCapacity(4096)
        }
    }
}
