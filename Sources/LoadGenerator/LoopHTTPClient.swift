#if canImport(Glibc)
import CEpoll
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// The `loop` engine: plain HTTP/1.1 keep-alive connections on non-blocking sockets, driven by
/// event-loop threads that are also the virtual users' task executors.
///
/// Why: on a 2-core machine the load generator shares the cores with the server it measures, so
/// every microsecond it spends per request is taken from the server. With the `nio` engine a
/// request crossed threads twice (a virtual user's task on Swift's pool hands the request to a
/// NIO event loop, whose reply resumes the task on the pool again) and went through a channel
/// pipeline, `ByteBuffer`s, `HTTPHeaders`, a promise and a timer: about 57 µs of CPU per checked
/// refresh. Here a virtual user's task runs *on* the loop thread that owns its connection
/// (`executor(for:)`): it writes its request to the socket itself, and the loop, when the reply
/// is read and parsed, resumes the task in the same wake-up, on the same thread.
///
/// One connection per request in flight: a request takes an idle connection of its loop or opens
/// one; a connection the server closed, that failed, timed out or answered with
/// `Connection: close` is dropped, never reused. Responses are parsed by `HTTPResponseParser`.
final class LoopHTTPClient: Sendable {
    struct Failure: Error, CustomStringConvertible {
        enum Kind: String { case timeout, connectionClosed = "connection_closed", bodyTooLarge = "body_too_large", connect, io, protocolError = "protocol" }
        var kind: Kind
        var description: String
    }

    let loops: [EventLoopThread]
    let address: SocketAddress
    let hostHeader: String
    let pathPrefix: String
    let timeoutNanos: UInt64
    let maxBody: Int
    private let nextLoop = Atomic<Int>(0)

    init(loops: [EventLoopThread], address: SocketAddress, hostHeader: String, pathPrefix: String, timeout: Double, maxBody: Int) {
        self.loops = loops
        self.address = address
        self.hostHeader = hostHeader
        self.pathPrefix = pathPrefix
        self.timeoutNanos = UInt64(timeout * 1e9)
        self.maxBody = maxBody
    }

    /// Builds a client for `target` (an `http://` base URL checked by `TargetGuard`) with `threads`
    /// event-loop threads.
    static func make(target: Target, threads: Int, timeout: Double, maxBody: Int, poller: PollerKind = .default) throws -> LoopHTTPClient {
        guard let components = URLComponents(string: target.baseURL), components.scheme?.lowercased() == "http" else {
            throw LoadError.invalidURL("'\(target.baseURL)': the loop engine speaks plain http only (use --engine async-http-client)")
        }
        let port = components.port ?? 80
        guard (1...65535).contains(port) else { throw LoadError.invalidURL("'\(target.baseURL)': bad port") }
        // Connect to the address the guard checked, so nothing is resolved twice.
        let address: SocketAddress
        if let checked = target.addresses.first(where: { !$0.contains(":") }) ?? target.addresses.first,
           let parsed = SocketAddress(numeric: checked, port: UInt16(port)) {
            address = parsed
        } else {
            address = try SocketAddress.resolve(host: components.host ?? target.host, port: UInt16(port))
        }
        let hostHeader = components.port.map { "\(components.host ?? target.host):\($0)" } ?? (components.host ?? target.host)
        var prefix = components.percentEncodedPath
        while prefix.hasSuffix("/") { prefix.removeLast() }
        let loops = try (0..<max(threads, 1)).map { try EventLoopThread(name: "load-loop-\($0)", poller: poller) }
        return LoopHTTPClient(loops: loops, address: address, hostHeader: hostHeader, pathPrefix: prefix, timeout: timeout, maxBody: maxBody)
    }

    /// The executor virtual user `index` runs on (its requests then cross no thread).
    func executor(for index: Int) -> any TaskExecutor { loops[index % loops.count].executor }

    /// The bytes of one request: request line, `Host`, the given headers, `Content-Length` when
    /// there is a body, and the body.
    func serialize(method: String, path: String, headers: [(String, String)], body: [UInt8]?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160 + (body?.count ?? 0) + headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 })
        out.append(contentsOf: method.utf8)
        out.append(32)
        out.append(contentsOf: pathPrefix.utf8)
        out.append(contentsOf: path.utf8)
        out.append(contentsOf: " HTTP/1.1\r\nHost: ".utf8)
        out.append(contentsOf: hostHeader.utf8)
        out.append(contentsOf: "\r\n".utf8)
        for (name, value) in headers {
            out.append(contentsOf: name.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: value.utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
        if let body {
            out.append(contentsOf: "Content-Length: ".utf8)
            out.append(contentsOf: String(body.count).utf8)
            out.append(contentsOf: "\r\n\r\n".utf8)
            out.append(contentsOf: body)
        } else {
            out.append(contentsOf: "\r\n".utf8)
        }
        return out
    }

    /// Sends one request and waits for the whole response. From a task already on one of the
    /// loops this crosses no thread; from anywhere else it hops to a loop first.
    func execute(method: String, path: String, headers: [(String, String)], body: [UInt8]?) async throws -> (status: Int, body: [UInt8]) {
        let request = serialize(method: method, path: path, headers: headers, body: body)
        for loop in loops where loop.isCurrent {
            return try await loop.send(request, to: address, timeoutNanos: timeoutNanos, maxBody: maxBody)
        }
        let loop = loops[nextLoop.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
        return try await withTaskExecutorPreference(loop.executor) {
            try await loop.send(request, to: self.address, timeoutNanos: self.timeoutNanos, maxBody: self.maxBody)
        }
    }

    /// Stops the loops, closing their connections.
    func shutdown() async {
        for loop in loops { await loop.stop() }
    }
}

/// An IPv4 or IPv6 socket address.
struct SocketAddress: Sendable {
    var storage: sockaddr_storage
    var length: socklen_t
    var family: Int32 { Int32(storage.ss_family) }

    /// A numeric IPv4 or IPv6 address (no lookup).
    init?(numeric host: String, port: UInt16) {
        let text = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = v4
            self.init(address)
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = v6
            self.init(address)
        } else {
            return nil
        }
    }

    /// `address` (a `sockaddr_in` or `sockaddr_in6`) in a `sockaddr_storage`.
    private init<Address>(_ address: Address) {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in withUnsafeBytes(of: address) { raw.copyMemory(from: $0) } }
        self.storage = storage
        self.length = socklen_t(MemoryLayout<Address>.size)
    }

    /// The first address `host` resolves to (only for `--allow-remote` targets, which the guard
    /// did not resolve).
    static func resolve(host: String, port: UInt16) throws -> SocketAddress {
        guard let first = try? TargetGuard.resolve(host).first, let address = SocketAddress(numeric: first.text, port: port) else {
            throw LoadError.invalidURL("cannot resolve '\(host)'")
        }
        return address
    }
}

/// Which readiness API a loop uses: epoll on Linux, poll(2) elsewhere (and in tests on Linux).
enum PollerKind: Sendable {
    case epoll, poll
    static var `default`: PollerKind {
        #if os(Linux)
        .epoll
        #else
        .poll
        #endif
    }
}

/// One event-loop thread: owns its connections and runs the tasks that prefer its executor.
///
/// Everything but `remote`, `signalled` and the wake-up pipe is touched on the loop thread only
/// (hence `@unchecked Sendable`): `send` checks it runs there, and other threads reach the loop
/// only through `executor.enqueue`, which queues under the `remote` lock and writes to the pipe.
final class EventLoopThread: TaskExecutor, @unchecked Sendable {
    /// The loop is its own executor: jobs run on the loop thread, and once the loop has stopped,
    /// on the global executor.
    var executor: any TaskExecutor { self }
    let name: String

    // Shared with other threads.
    private struct Remote {
        var jobs: [UnownedJob] = []
        var stopping = false
        var stopped = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let remote = Mutex(Remote())
    /// True while the loop will look at `remote` again before it sleeps: producers then need
    /// not write to the pipe.
    private let signalled = Atomic<Bool>(false)
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let started = DispatchSemaphore(value: 0)
    private var thread: pthread_t?

    // Loop thread only.
    private var poller: any Poller
    private var localJobs: [UnownedJob] = []
    private var connections: [Int32: Connection] = [:]
    private var idle: [Connection] = []
    private var inFlight = 0
    private var nextTimeoutScan: UInt64 = 0
    private var readBuffer = [UInt8](repeating: 0, count: 64 << 10)
    /// Set when the loop has ended: `send` refuses from then on.
    private var ended = false

    init(name: String, poller kind: PollerKind) throws {
        self.name = name
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw LoopHTTPClient.Failure(kind: .io, description: "pipe: \(String(cString: strerror(errno)))") }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        switch kind {
        #if os(Linux)
        case .epoll: poller = try EpollPoller()
        #else
        case .epoll: poller = PollPoller()
        #endif
        case .poll: poller = PollPoller()
        }
        poller.add(wakeRead, writable: false)
        let thread = Thread { [self] in
            self.thread = pthread_self()
            started.signal()
            run()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
        started.wait()
    }

    /// Whether the calling thread is this loop's.
    var isCurrent: Bool {
        guard let thread else { return false }
        return pthread_equal(pthread_self(), thread) != 0
    }

    func enqueue(_ job: consuming ExecutorJob) {
        enqueueUnowned(UnownedJob(job))
    }

    private func enqueueUnowned(_ job: UnownedJob) {
        if isCurrent {
            localJobs.append(job)
            return
        }
        let accepted = remote.withLock { state -> Bool in
            if state.stopped { return false }
            state.jobs.append(job)
            return true
        }
        guard accepted else {
            globalConcurrentExecutor.enqueue(job)
            return
        }
        if !signalled.exchange(true, ordering: .sequentiallyConsistent) { wake() }
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Stops the loop after the jobs queued so far, fails what is in flight, closes connections.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = remote.withLock { state -> Bool in
                if state.stopped { return true }
                state.stopping = true
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() } else { wake() }
        }
    }

    // MARK: The loop

    private func run() {
        var remoteJobs: [UnownedJob] = []
        var running: [UnownedJob] = []
        var events: [PollEvent] = []
        var sink = [UInt8](repeating: 0, count: 64)
        let unownedExecutor = asUnownedTaskExecutor()
        while true {
            // Jobs first: tasks resumed by the last replies write their next requests.
            while !localJobs.isEmpty {
                swap(&localJobs, &running)
                for job in running { job.runSynchronously(on: unownedExecutor) }
                running.removeAll(keepingCapacity: true)
            }
            // May we sleep? From here on a producer writes to the pipe.
            signalled.store(false, ordering: .sequentiallyConsistent)
            let (stopping, pending) = remote.withLock { state -> (Bool, Bool) in
                swap(&state.jobs, &remoteJobs)
                return (state.stopping, !remoteJobs.isEmpty)
            }
            if pending || stopping { signalled.store(true, ordering: .sequentiallyConsistent) }
            for job in remoteJobs { localJobs.append(job) }
            remoteJobs.removeAll(keepingCapacity: true)
            if stopping && localJobs.isEmpty { break }
            let timeout: Int32 = !localJobs.isEmpty ? 0 : inFlight > 0 ? 5 : -1
            poller.wait(timeoutMilliseconds: timeout, into: &events)
            signalled.store(true, ordering: .sequentiallyConsistent)
            for event in events {
                if event.fd == wakeRead {
                    while read(wakeRead, &sink, sink.count) > 0 {}
                    continue
                }
                if let connection = connections[event.fd] { handle(connection, event) }
            }
            if inFlight > 0 { expireTimeouts() }
        }
        // Stop: fail whatever waits, close everything, run what that resumed (any request it
        // sends is refused), then hand later jobs to the global executor.
        ended = true
        for connection in Array(connections.values) {
            if connection.continuation != nil {
                finish(connection, .failure(LoopHTTPClient.Failure(kind: .connectionClosed, description: "the load generator stopped")))
            } else {
                close(connection)
            }
        }
        while !localJobs.isEmpty {
            swap(&localJobs, &running)
            for job in running { job.runSynchronously(on: unownedExecutor) }
            running.removeAll(keepingCapacity: true)
        }
        let waiters = remote.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.stopped = true
            swap(&state.jobs, &remoteJobs)
            defer { state.waiters = [] }
            return state.waiters
        }
        for job in remoteJobs { globalConcurrentExecutor.enqueue(job) }
        closeDescriptor(wakeRead)
        closeDescriptor(wakeWrite)
        poller.close()
        for waiter in waiters { waiter.resume() }
    }

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

    private func handle(_ connection: Connection, _ event: PollEvent) {
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
    private func finish(_ connection: Connection, _ result: Result<(Int, [UInt8]), LoopHTTPClient.Failure>, reusable: Bool = false) {
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

    private func close(_ connection: Connection) {
        guard connections[connection.fd] === connection else { return }
        connections[connection.fd] = nil
        poller.remove(connection.fd)
        closeDescriptor(connection.fd)
        connection.state = .closed
    }

    private func expireTimeouts() {
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

@inline(__always) private func closeDescriptor(_ fd: Int32) {
    #if canImport(Darwin)
    _ = Darwin.close(fd)
    #else
    _ = Glibc.close(fd)
    #endif
}

// MARK: Readiness

struct PollEvent {
    var fd: Int32
    var readable: Bool
    var writable: Bool
    /// Error or hang-up: read to find out what happened.
    var failed: Bool
}

protocol Poller {
    mutating func add(_ fd: Int32, writable: Bool)
    mutating func modify(_ fd: Int32, writable: Bool)
    mutating func remove(_ fd: Int32)
    /// Waits up to `timeoutMilliseconds` (-1: no limit) and puts what is ready in `events`.
    mutating func wait(timeoutMilliseconds: Int32, into events: inout [PollEvent])
    mutating func close()
}

/// poll(2): portable; costs a scan of every descriptor per call.
struct PollPoller: Poller {
    private var descriptors: [pollfd] = []
    private var positions: [Int32: Int] = [:]

    mutating func add(_ fd: Int32, writable: Bool) {
        positions[fd] = descriptors.count
        descriptors.append(pollfd(fd: fd, events: Self.mask(writable), revents: 0))
    }

    mutating func modify(_ fd: Int32, writable: Bool) {
        if let position = positions[fd] { descriptors[position].events = Self.mask(writable) }
    }

    mutating func remove(_ fd: Int32) {
        guard let position = positions.removeValue(forKey: fd) else { return }
        let last = descriptors.count - 1
        if position != last {
            descriptors[position] = descriptors[last]
            positions[descriptors[position].fd] = position
        }
        descriptors.removeLast()
    }

    static func mask(_ writable: Bool) -> Int16 { Int16(POLLIN) | (writable ? Int16(POLLOUT) : 0) }

    mutating func wait(timeoutMilliseconds: Int32, into events: inout [PollEvent]) {
        events.removeAll(keepingCapacity: true)
        let count = descriptors.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), timeoutMilliseconds) }
        guard count > 0 else { return }
        for descriptor in descriptors where descriptor.revents != 0 {
            let r = descriptor.revents
            events.append(PollEvent(
                fd: descriptor.fd, readable: r & Int16(POLLIN) != 0, writable: r & Int16(POLLOUT) != 0,
                failed: r & (Int16(POLLERR) | Int16(POLLHUP) | Int16(POLLNVAL)) != 0))
        }
    }

    mutating func close() {}
}

#if os(Linux)
/// epoll(7), level-triggered: the kernel hands back only what is ready.
struct EpollPoller: Poller {
    private let epoll: Int32
    private var buffer = [epoll_event](repeating: epoll_event(), count: 256)

    init() throws {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw LoopHTTPClient.Failure(kind: .io, description: "epoll_create1: \(String(cString: strerror(errno)))") }
    }

    static func mask(_ writable: Bool) -> UInt32 {
        EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (writable ? EPOLLOUT.rawValue : 0)
    }

    mutating func add(_ fd: Int32, writable: Bool) {
        var event = epoll_event()
        event.events = Self.mask(writable)
        event.data.fd = fd
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
    }

    mutating func modify(_ fd: Int32, writable: Bool) {
        var event = epoll_event()
        event.events = Self.mask(writable)
        event.data.fd = fd
        _ = epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event)
    }

    mutating func remove(_ fd: Int32) {
        var event = epoll_event()
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, fd, &event)
    }

    mutating func wait(timeoutMilliseconds: Int32, into events: inout [PollEvent]) {
        events.removeAll(keepingCapacity: true)
        let count = buffer.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, Int32($0.count), timeoutMilliseconds) }
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            let event = buffer[index]
            let bits = event.events
            events.append(PollEvent(
                fd: event.data.fd, readable: bits & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0,
                writable: bits & EPOLLOUT.rawValue != 0, failed: bits & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0))
        }
    }

    mutating func close() { _ = Glibc.close(epoll) }
}
#endif
