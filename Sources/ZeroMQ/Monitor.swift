import CZeroMQ

/// Connection events a socket monitor reports (`ZMQ_EVENT_*`, the stable subset).
public struct SocketEvents: OptionSet, Sendable, Hashable {
    /// The `ZMQ_EVENT_*` bits.
    public let rawValue: UInt16
    /// Events from their `ZMQ_EVENT_*` bits.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// A connection was made (before any handshake).
    public static let connected = SocketEvents(rawValue: UInt16(ZMQ_EVENT_CONNECTED))
    /// A connect attempt is in progress.
    public static let connectDelayed = SocketEvents(rawValue: UInt16(ZMQ_EVENT_CONNECT_DELAYED))
    /// A reconnect is scheduled (after a failed attempt or a lost connection).
    public static let connectRetried = SocketEvents(rawValue: UInt16(ZMQ_EVENT_CONNECT_RETRIED))
    /// A connection was lost.
    public static let disconnected = SocketEvents(rawValue: UInt16(ZMQ_EVENT_DISCONNECTED))
    /// The ZMTP handshake (and the security mechanism's, e.g. CURVE) completed: messages flow.
    public static let handshakeSucceeded = SocketEvents(rawValue: UInt16(ZMQ_EVENT_HANDSHAKE_SUCCEEDED))
}

/// One event read from a monitor: what happened, and its value (a file descriptor, an errno
/// or an interval, depending on the event).
public struct SocketEvent: Sendable, Hashable {
    /// What happened (one event).
    public var event: SocketEvents
    /// The event's value: a file descriptor, an errno or an interval in milliseconds.
    public var value: UInt32
}

extension Socket {
    /// Publishes this socket's `events` on a PAIR socket that libzmq binds at `endpoint` (which
    /// must be `inproc://`, in this socket's context); connect a `.pair` socket there and read
    /// them with `receiveEvent`. Call it before `connect` or `bind` to see every event.
    ///
    /// libzmq writes each event from its I/O thread with a *blocking* send, and keeps the
    /// monitor until the socket is destroyed, which is after `close()` returns. So keep reading
    /// the events, and call `stopMonitor()` before closing the reading socket: an event sent to
    /// a monitor nobody reads any more blocks that I/O thread, and with it every socket of the
    /// context.
    public func monitor(_ endpoint: String, events: SocketEvents) throws {
        try check(zmq_socket_monitor(handle, endpoint, Int32(events.rawValue)), "zmq_socket_monitor(\(endpoint))")
    }

    /// Stops the monitor started by `monitor(_:events:)`, at once: no event is sent after this
    /// returns. Does nothing when none is running.
    public func stopMonitor() {
        _ = zmq_socket_monitor(handle, nil, 0)
    }

    /// On a PAIR socket connected to a monitor endpoint: reads one event. Returns nil when none
    /// is waiting and `dontWait` is set. A message that is not an event is skipped.
    public func receiveEvent(dontWait: Bool = true) throws -> SocketEvent? {
        while true {
            // Frame 1: the event (16 bits) and its value (32 bits), in host order.
            guard let (event, more) = try receive(dontWait: dontWait, { bytes, more -> (SocketEvent?, Bool) in
                guard bytes.count == 6 else { return (nil, more) }
                let code = bytes.loadUnaligned(fromByteOffset: 0, as: UInt16.self)
                let value = bytes.loadUnaligned(fromByteOffset: 2, as: UInt32.self)
                return (SocketEvent(event: SocketEvents(rawValue: code), value: value), more)
            }) else { return nil }
            // Frame 2: the endpoint. Part of the same message, so already here.
            var hasMore = more
            while hasMore {
                guard let next = try receive(dontWait: false, { _, more in more }) else { break }
                hasMore = next
            }
            if let event { return event }
        }
    }
}
