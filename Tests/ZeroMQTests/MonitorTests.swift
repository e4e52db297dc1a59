import Foundation
import Testing
@testable import ZeroMQ

/// Socket monitors, and the libzmq behaviour that made `RPCClient` stop using `ZMQ_IMMEDIATE`.
@Suite("ZeroMQ monitor")
struct MonitorTests {
    let context: ZMQContext

    init() throws { context = try ZMQContext() }

    /// A DEALER connected to a ROUTER over tcp, with a monitor reporting its connection events.
    struct Link {
        let router: Socket
        let dealer: Socket
        let events: Socket

        /// Stops the monitor first: libzmq's I/O thread would block on an event nobody reads.
        func close() {
            dealer.stopMonitor()
            dealer.close()
            events.close()
            router.close()
        }
    }

    func link(immediate: Bool) throws -> Link {
        let router = try context.socket(.router)
        try router.bind("tcp://127.0.0.1:*")
        let dealer = try context.socket(.dealer)
        try dealer.set([.immediate(immediate), .reconnectInterval(100)])
        let monitorEndpoint = "inproc://monitor-\(UInt64.random(in: 0...UInt64.max))"
        try dealer.monitor(monitorEndpoint, events: [.handshakeSucceeded, .disconnected, .connectRetried])
        let events = try context.socket(.pair)
        try events.connect(monitorEndpoint)
        try dealer.connect(try router.lastEndpoint)
        return Link(router: router, dealer: dealer, events: events)
    }

    /// Reads monitor events until `wanted` arrives or 10 s pass; returns the events read.
    func waitFor(_ wanted: SocketEvents, on events: Socket) throws -> [SocketEvents] {
        let deadline = ContinuousClock.now + .seconds(10)
        var seen: [SocketEvents] = []
        try events.set(.receiveTimeout(100))
        while ContinuousClock.now < deadline {
            guard let event = try events.receiveEvent(dontWait: false) else { continue }
            seen.append(event.event)
            if event.event == wanted { return seen }
        }
        Issue.record("no \(wanted) event within 10 s; saw \(seen)")
        return seen
    }

    /// The server answers and closes at once; the client reads its reply only after libzmq has
    /// handled the disconnect (it has scheduled the reconnect). Returns the reply, if any.
    func replyReadAfterPeerClosed(immediate: Bool) throws -> [UInt8]? {
        let link = try link(immediate: immediate)
        defer { link.close() }
        _ = try waitFor(.handshakeSucceeded, on: link.events)
        try link.dealer.send([1])
        // Find nothing to read, as a client waiting for its reply does: libzmq's reader then
        // sleeps, and the reply arrives as a command, handled with the disconnect's commands.
        #expect(try link.dealer.receive(dontWait: true) == nil)
        try link.router.set(.receiveTimeout(10_000))
        let request = try #require(try link.router.receiveMultipart())
        try link.router.set(.linger(1000))
        try link.router.send(multipart: [request[0], [2]])
        link.router.close()
        _ = try waitFor(.disconnected, on: link.events)
        _ = try waitFor(.connectRetried, on: link.events)
        return try link.dealer.receive(dontWait: true)?.bytes
    }

    @Test("a monitor reports the handshake and the loss of a connection")
    func events() throws {
        let link = try link(immediate: false)
        defer { link.close() }
        #expect(try waitFor(.handshakeSucceeded, on: link.events).last == .handshakeSucceeded)
        link.router.close()
        #expect(try waitFor(.disconnected, on: link.events).last == .disconnected)
    }

    @Test("with ZMQ_IMMEDIATE, a DEALER drops a reply it has not read when the peer disconnects")
    func immediateDropsUnreadReply() throws {
        // libzmq (socket_base_t::hiccuped) terminates the connection's pipe without delay when
        // ZMQ_IMMEDIATE is set, discarding what was received but not yet read.
        #expect(try replyReadAfterPeerClosed(immediate: true) == nil)
    }

    @Test("without ZMQ_IMMEDIATE, a DEALER keeps a reply it has not read when the peer disconnects")
    func withoutImmediateKeepsUnreadReply() throws {
        #expect(try replyReadAfterPeerClosed(immediate: false) == [2])
    }
}
