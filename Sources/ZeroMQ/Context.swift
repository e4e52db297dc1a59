import CZeroMQ

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
