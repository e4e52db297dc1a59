import CZeroMQ
import Synchronization

/// A ZeroMQ context. Thread-safe (libzmq guarantees it), so it is `Sendable`; the sockets it
/// makes are not.
public final class ZMQContext: Sendable {
    // libzmq's context is documented thread-safe; the pointer never changes after init.
    nonisolated(unsafe) let handle: UnsafeMutableRawPointer

    /// Creates a context with `ioThreads` background I/O threads.
    public init(ioThreads: Int = 1) throws {
        guard let handle = zmq_ctx_new() else { throw ZMQError.last("zmq_ctx_new") }
        self.handle = handle
        if ioThreads != 1 {
            zmq_ctx_set(handle, ZMQ_IO_THREADS, Int32(ioThreads))
        }
        // Sockets are closed by their owners; blocking_ off lets zmq_ctx_term return even if a
        // socket leaked (its pending messages are dropped).
        zmq_ctx_set(handle, ZMQ_BLOCKY, 0)
    }

    /// A process-wide context, for code that does not need its own. Required for `inproc://`
    /// endpoints shared between components of one process.
    public static let shared: ZMQContext = {
        // zmq_ctx_new only fails when the process is out of file descriptors or memory.
        // swiftlint:disable:next force_try
        try! ZMQContext()
    }()

    /// Creates a socket of `type`. The socket belongs to the calling thread or task until it is
    /// handed on (`Socket` is not `Sendable`).
    public func socket(_ type: SocketType) throws -> Socket {
        try Socket(context: self, type: type)
    }

    /// Shuts the context down: blocking calls on its sockets fail with `ETERM`.
    public func shutdown() {
        zmq_ctx_shutdown(handle)
    }

    deinit {
        var rc: Int32
        repeat { rc = zmq_ctx_term(handle) } while rc != 0 && czmq_errno() == EINTR
    }

    /// Whether libzmq was built with `capability` (for example `"curve"`, `"ipc"`).
    public static func has(_ capability: String) -> Bool {
        zmq_has(capability) != 0
    }

    /// The libzmq version, `(major, minor, patch)`.
    public static var version: (major: Int, minor: Int, patch: Int) {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return (Int(major), Int(minor), Int(patch))
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension ZMQContext {
    private static let byHost = Mutex<[String: ZMQContext]>([:])

    /// The context for a socket that connects to `endpoint`. libzmq resolves a host name in its
    /// I/O thread, synchronously, at every (re)connection: with one context for everything, a slow
    /// DNS answer for one stopped peer (20 s seen in a container network) froze every socket of
    /// the process, its own server included (issue 35). So an endpoint that names a host (not an
    /// address, not `ipc://` or `inproc://`) gets a context of its own, one I/O thread, shared by
    /// every socket to that endpoint and kept for the process's life: a slow lookup then delays
    /// only the connections to that peer. Everything else uses `shared`.
    public static func forConnecting(to endpoint: String) -> ZMQContext {
        guard namesHost(endpoint) else { return .shared }
        return byHost.withLock { contexts in
            if let context = contexts[endpoint] { return context }
            // zmq_ctx_new only fails when the process is out of file descriptors or memory.
            // swiftlint:disable:next force_try
            let context = try! ZMQContext()
            contexts[endpoint] = context
            return context
        }
    }

    /// Whether `endpoint` is `tcp://` with a host name rather than an IPv4 or IPv6 address.
    public static func namesHost(_ endpoint: String) -> Bool {
        guard endpoint.hasPrefix("tcp://") else { return false }
        var address = Substring(endpoint.dropFirst("tcp://".count))
        if let semicolon = address.lastIndex(of: ";") { address = address[address.index(after: semicolon)...] }
        if address.hasPrefix("[") { return false }
        guard let colon = address.lastIndex(of: ":") else { return false }
        let host = address[..<colon]
        if host.isEmpty || host == "*" { return false }
        return !host.allSatisfy { $0 == "." || $0.isASCII && $0.isNumber }
    }
}
