import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A ZeroMQ socket.
///
/// libzmq sockets must never be used from two threads at once. `Socket` is therefore **not
/// `Sendable`**: Swift 6's strict concurrency checking refuses to share one between tasks or
/// threads, and a socket can only be *moved* (transferred with `sending`) to the one place that
/// uses it from then on — in Gatehouse, the dedicated I/O thread of a ``SocketLoop``. This is
/// the compiler's guarantee, not a comment.
public final class Socket {
    let handle: UnsafeMutableRawPointer
    /// The socket's pattern.
    public let type: SocketType
    /// The context the socket belongs to (kept alive as long as the socket).
    public let context: ZMQContext
    private var closed = false
    /// Reused for every receive, so receiving allocates nothing beyond the bytes handed out.
    private let scratch: UnsafeMutablePointer<zmq_msg_t>

    init(context: ZMQContext, type: SocketType) throws {
        guard let handle = zmq_socket(context.handle, type.rawValue) else {
            throw ZMQError.last("zmq_socket")
        }
        self.handle = handle
        self.type = type
        self.context = context
        self.scratch = .allocate(capacity: 1)
        zmq_msg_init(scratch)
        // Do not hang the process at exit on undelivered messages; owners raise it if needed.
        var linger: Int32 = 0
        zmq_setsockopt(handle, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
    }

    deinit {
        close()
        zmq_msg_close(scratch)
        scratch.deallocate()
    }

    /// Closes the socket. Idempotent. Pending outgoing messages are kept for the linger period.
    public func close() {
        guard !closed else { return }
        closed = true
        zmq_close(handle)
    }

    // MARK: - Endpoints

    /// Binds to `endpoint` (`tcp://127.0.0.1:5555`, `tcp://127.0.0.1:*`, `ipc:///path`, `inproc://name`).
    public func bind(_ endpoint: String) throws {
        try check(zmq_bind(handle, endpoint), "zmq_bind(\(endpoint))")
    }

    /// Connects to `endpoint`. Returns at once; the connection is made (and remade) in the background.
    public func connect(_ endpoint: String) throws {
        try check(zmq_connect(handle, endpoint), "zmq_connect(\(endpoint))")
    }

    /// Stops listening on `endpoint`.
    public func unbind(_ endpoint: String) throws {
        try check(zmq_unbind(handle, endpoint), "zmq_unbind(\(endpoint))")
    }

    /// Disconnects from `endpoint`.
    public func disconnect(_ endpoint: String) throws {
        try check(zmq_disconnect(handle, endpoint), "zmq_disconnect(\(endpoint))")
    }

    /// The endpoint last bound, with wildcards resolved (`tcp://127.0.0.1:41234`).
    public var lastEndpoint: String {
        get throws {
            var buffer = [CChar](repeating: 0, count: 1024)
            var size = buffer.count
            try check(zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size), "getsockopt(LAST_ENDPOINT)")
            return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    // MARK: - Sending

    /// Sends one frame. `more` marks it as part of a multipart message with more frames to come.
    /// Returns `false` when `dontWait` is set and the frame cannot be queued now (`EAGAIN`).
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, more: Bool = false, dontWait: Bool = false) throws -> Bool {
        var flags: Int32 = 0
        if more { flags |= ZMQ_SNDMORE }
        if dontWait { flags |= ZMQ_DONTWAIT }
        while true {
            let rc = zmq_send(handle, bytes.baseAddress, bytes.count, flags)
            if rc >= 0 { return true }
            let err = ZMQError.last("zmq_send")
            if err.isInterrupted { continue }
            if err.isWouldBlock { return false }
            throw err
        }
    }

    /// Sends one frame of bytes.
    @discardableResult
    public func send(_ bytes: [UInt8], more: Bool = false, dontWait: Bool = false) throws -> Bool {
        try bytes.withUnsafeBytes { try send($0, more: more, dontWait: dontWait) }
    }

    /// Sends a multipart message atomically: the peer gets every frame or none. Returns `false`
    /// (nothing sent) when `dontWait` is set and the message cannot be queued now.
    @discardableResult
    public func send(multipart frames: [[UInt8]], dontWait: Bool = false) throws -> Bool {
        precondition(!frames.isEmpty, "a message has at least one frame")
        for (index, frame) in frames.enumerated() {
            let more = index < frames.count - 1
            let sent = try send(frame, more: more, dontWait: dontWait)
            if !sent {
                // Only the first frame can meet EAGAIN: once it is queued libzmq accepts the rest.
                guard index == 0 else { throw ZMQError(code: EAGAIN, operation: "zmq_send(multipart part \(index))") }
                return false
            }
        }
        return true
    }

    // MARK: - Receiving

    /// Receives one frame and lends its bytes to `body` without copying them. Returns `nil` when
    /// `dontWait` is set and nothing is waiting. `more` tells whether more frames of the same
    /// message follow.
    public func receive<R>(dontWait: Bool = false, _ body: (_ bytes: UnsafeRawBufferPointer, _ more: Bool) throws -> R) throws -> R? {
        let flags: Int32 = dontWait ? ZMQ_DONTWAIT : 0
        while true {
            let rc = zmq_msg_recv(scratch, handle, flags)
            if rc >= 0 { break }
            let err = ZMQError.last("zmq_msg_recv")
            if err.isInterrupted { continue }
            if err.isWouldBlock { return nil }
            throw err
        }
        let more = zmq_msg_more(scratch) != 0
        let bytes = UnsafeRawBufferPointer(start: zmq_msg_data(scratch), count: zmq_msg_size(scratch))
        return try body(bytes, more)
    }

    /// A metadata property of the frame received last (`zmq_msg_gets`), e.g. `User-Id`: the
    /// id the ZAP handler gave the connection the frame came on. Nil when the frame has none.
    public func lastFrameProperty(_ name: String) -> String? {
        guard let value = zmq_msg_gets(scratch, name) else { return nil }
        return String(cString: value)
    }

    /// Receives one frame as bytes (one copy out of libzmq's buffer).
    public func receive(dontWait: Bool = false) throws -> (bytes: [UInt8], more: Bool)? {
        try receive(dontWait: dontWait) { bytes, more in (Array(bytes), more) }
    }

    /// Receives a whole multipart message. Returns `nil` when `dontWait` is set and nothing is waiting.
    public func receiveMultipart(dontWait: Bool = false) throws -> [[UInt8]]? {
        guard let first = try receive(dontWait: dontWait) else { return nil }
        var frames = [first.bytes]
        var more = first.more
        while more {
            // The rest of a message is already here: libzmq delivers messages whole.
            guard let next = try receive(dontWait: false) else { break }
            frames.append(next.bytes)
            more = next.more
        }
        return frames
    }

    /// Whether a frame can be received now / sent now without blocking.
    public var events: (readable: Bool, writable: Bool) {
        get throws {
            let value = try int32Option(ZMQ_EVENTS)
            return ((value & Int32(ZMQ_POLLIN)) != 0, (value & Int32(ZMQ_POLLOUT)) != 0)
        }
    }

    /// The socket's `ZMQ_FD`: a descriptor that becomes readable when the socket may have
    /// become readable or writable. Edge-triggered: after waiting on it, and after *any*
    /// operation on the socket, read `events` to learn the actual state. Safe to wait on from a
    /// thread that does not otherwise use the socket.
    public var fileDescriptor: Int32 {
        get throws { try int32Option(ZMQ_FD) }
    }

    // MARK: - Helpers

    func check(_ rc: Int32, _ operation: @autoclosure () -> String) throws {
        if rc != 0 { throw ZMQError.last(operation()) }
    }
}
