import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A libzmq failure: the `errno` it reported and libzmq's text for it.
///
/// `EAGAIN` never escapes as an error from the non-blocking calls (they return `nil`/`false`),
/// `EINTR` is retried inside the binding, and `ETERM` (the context is shutting down) is
/// reported as ``isTerminated`` so loops can end cleanly.
public struct ZMQError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `errno` value.
    public let code: Int32
    /// What the failing call was.
    public let operation: String

    /// An error of `operation` with `errno` value `code`.
    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// The current `zmq_errno()`, attributed to `operation`.
    static func last(_ operation: String) -> ZMQError {
        ZMQError(code: czmq_errno(), operation: operation)
    }

    /// The context was terminated (`ETERM`).
    public var isTerminated: Bool { code == ETERM }
    /// The operation would block (`EAGAIN`).
    public var isWouldBlock: Bool { code == EAGAIN }
    /// A signal interrupted the call (`EINTR`).
    public var isInterrupted: Bool { code == EINTR }
    /// The message could not be routed (`EHOSTUNREACH`, ROUTER with `routerMandatory`).
    public var isHostUnreachable: Bool { code == EHOSTUNREACH }

    /// `operation: libzmq's text (errno N)`, for logs.
    public var description: String {
        "\(operation): \(String(cString: zmq_strerror(code))) (errno \(code))"
    }
}
