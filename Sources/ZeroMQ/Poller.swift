import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What to wait for on a socket or file descriptor.
public struct PollEvents: OptionSet, Sendable, Hashable {
    /// The `ZMQ_POLLIN`/`ZMQ_POLLOUT` bits.
    public let rawValue: Int16
    /// The events of these bits.
    public init(rawValue: Int16) { self.rawValue = rawValue }
    /// A message (or data) can be read.
    public static let readable = PollEvents(rawValue: Int16(ZMQ_POLLIN))
    /// A message can be sent without blocking.
    public static let writable = PollEvents(rawValue: Int16(ZMQ_POLLOUT))
}

/// Waits on several sockets and file descriptors at once (`zmq_poll`). Keeps its item array
/// between calls so polling allocates nothing. Like `Socket`, a poller belongs to one thread.
public final class Poller {
    private var items: [zmq_pollitem_t] = []
    private var sockets: [Socket] = []

    /// A poller watching nothing yet.
    public init() {}

    /// Watches `socket` for `events`; returns the item's index.
    @discardableResult
    public func add(_ socket: Socket, events: PollEvents) -> Int {
        sockets.append(socket)
        items.append(zmq_pollitem_t(socket: socket.handle, fd: -1, events: events.rawValue, revents: 0))
        return items.count - 1
    }

    /// Watches a plain file descriptor (a pipe, an eventfd) for `events`; returns the item's index.
    @discardableResult
    public func add(fileDescriptor fd: Int32, events: PollEvents) -> Int {
        items.append(zmq_pollitem_t(socket: nil, fd: fd, events: events.rawValue, revents: 0))
        return items.count - 1
    }

    /// Changes what item `index` waits for (for example, add `.writable` while a send is blocked).
    public func setEvents(_ events: PollEvents, at index: Int) {
        items[index].events = events.rawValue
    }

    /// Waits until an item is ready or `timeoutMilliseconds` pass (-1 waits forever, 0 checks
    /// without waiting). Returns how many items are ready; 0 on timeout or signal (`EINTR`).
    /// Throws when the context is terminated (`ETERM`) or on other failures.
    public func poll(timeoutMilliseconds: Int) throws -> Int {
        let rc = items.withUnsafeMutableBufferPointer { buffer in
            zmq_poll(buffer.baseAddress, Int32(buffer.count), timeoutMilliseconds)
        }
        if rc >= 0 { return Int(rc) }
        let err = ZMQError.last("zmq_poll")
        if err.isInterrupted { return 0 }
        throw err
    }

    /// What item `index` is ready for after the last `poll`.
    public func readyEvents(at index: Int) -> PollEvents {
        PollEvents(rawValue: items[index].revents)
    }
}

/// A wake-up signal another thread can raise to interrupt a `Poller` (an eventfd on Linux, a
/// pipe elsewhere). `signal()` is safe from any thread; `clear()` belongs to the polling thread.
public final class PollSignal: Sendable {
    /// The descriptor to add to a poller with `.readable`.
    public let fileDescriptor: Int32
    private let writeDescriptor: Int32

    /// A signal not yet raised; throws when no eventfd (or pipe) can be made.
    public init() throws {
        #if os(Linux)
        let fd = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard fd >= 0 else { throw ZMQError(code: errno, operation: "eventfd") }
        fileDescriptor = fd
        writeDescriptor = fd
        #else
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ZMQError(code: errno, operation: "pipe") }
        _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
        _ = fcntl(fds[1], F_SETFL, O_NONBLOCK)
        fileDescriptor = fds[0]
        writeDescriptor = fds[1]
        #endif
    }

    deinit {
        close(fileDescriptor)
        if writeDescriptor != fileDescriptor { close(writeDescriptor) }
    }

    /// Wakes the poller.
    public func signal() {
        var one: UInt64 = 1
        #if os(Linux)
        _ = withUnsafeBytes(of: &one) { write(writeDescriptor, $0.baseAddress, 8) }
        #else
        _ = withUnsafeBytes(of: &one) { write(writeDescriptor, $0.baseAddress, 1) }
        #endif
    }

    /// Consumes pending signals so the next poll waits again.
    public func clear() {
        var buffer: UInt64 = 0
        while withUnsafeMutableBytes(of: &buffer, { read(fileDescriptor, $0.baseAddress, 8) }) > 0 {}
    }
}
