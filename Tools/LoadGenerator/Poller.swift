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
