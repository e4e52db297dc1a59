import GatehouseTestSupport
import Testing
@testable import ZeroMQ

@Suite("ZeroMQ binding")
struct SocketTests {
    let context: ZMQContext

    init() throws { context = try ZMQContext() }

    @Test("PAIR over inproc sends and receives single and multipart messages")
    func pairRoundTrip() throws {
        let a = try context.socket(.pair)
        let b = try context.socket(.pair)
        try a.bind("inproc://pair-roundtrip")
        try b.connect("inproc://pair-roundtrip")
        try a.send([1, 2, 3])
        let frame = try #require(try b.receive())
        #expect(frame.bytes == [1, 2, 3])
        #expect(frame.more == false)
        try b.send(multipart: [[9], [], [7, 7]])
        #expect(try a.receiveMultipart() == [[9], [], [7, 7]])
    }

    @Test("DEALER to ROUTER over tcp carries the peer identity")
    func dealerRouter() throws {
        let router = try context.socket(.router)
        try router.bind("tcp://127.0.0.1:*")
        let endpoint = try router.lastEndpoint
        #expect(endpoint.hasPrefix("tcp://127.0.0.1:"))
        let dealer = try context.socket(.dealer)
        try dealer.set(.routingID(Array("client-1".utf8)))
        try dealer.connect(endpoint)
        try dealer.send(multipart: [Array("hello".utf8)])
        let frames = try #require(try router.receiveMultipart())
        #expect(frames == [Array("client-1".utf8), Array("hello".utf8)])
        try router.send(multipart: [frames[0], Array("world".utf8)])
        #expect(try dealer.receiveMultipart() == [Array("world".utf8)])
    }

    @Test("a non-blocking receive on an empty socket returns nil (EAGAIN is not an error)")
    func dontWaitReturnsNil() throws {
        let pull = try context.socket(.pull)
        try pull.bind("inproc://empty")
        #expect(try pull.receive(dontWait: true) == nil)
        #expect(try pull.receiveMultipart(dontWait: true) == nil)
    }

    @Test("a DEALER with immediate set cannot queue while no peer is connected")
    func immediateWouldBlock() throws {
        let dealer = try context.socket(.dealer)
        try dealer.set(.immediate(true))
        try dealer.connect("tcp://127.0.0.1:1")
        #expect(try dealer.send([1], dontWait: true) == false)
    }

    @Test("bad endpoints and options throw ZMQError with errno and operation")
    func errors() throws {
        let s = try context.socket(.router)
        #expect(throws: ZMQError.self) { try s.bind("nonsense://x") }
        #expect(throws: ZMQError.self) { try s.bind("tcp://256.1.1.1:5") }
        #expect(throws: ZMQError.self) { try s.set(.curvePublicKey([1, 2, 3])) }
        #expect(throws: ZMQError.self) { try s.set(.linger(Int(Int32.max) + 1)) }
        do {
            try s.connect("bogus")
            Issue.record("connect to a bogus endpoint succeeded")
        } catch let error as ZMQError {
            #expect(error.description.contains("zmq_connect(bogus)"))
            #expect(!error.isWouldBlock)
        }
    }

    @Test("a poller wakes on a readable socket and on a PollSignal, and times out otherwise")
    func polling() throws {
        let push = try context.socket(.push)
        let pull = try context.socket(.pull)
        try pull.bind("inproc://poll")
        try push.connect("inproc://poll")
        let signal = try PollSignal()
        let poller = Poller()
        let socketIndex = poller.add(pull, events: .readable)
        let signalIndex = poller.add(fileDescriptor: signal.fileDescriptor, events: .readable)
        #expect(try poller.poll(timeoutMilliseconds: 10) == 0)
        try push.send([42])
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 1)
        #expect(poller.readyEvents(at: socketIndex).contains(.readable))
        _ = try pull.receive()
        signal.signal()
        signal.signal()
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 1)
        #expect(poller.readyEvents(at: signalIndex).contains(.readable))
        signal.clear()
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)
    }

    @Test("PUB/SUB filters by topic prefix")
    func pubSub() async throws {
        let pub = try context.socket(.pub)
        try pub.bind("inproc://events")
        let sub = try context.socket(.sub)
        try sub.set(.subscribe(Array("user.".utf8)))
        try sub.connect("inproc://events")
        // A subscription takes effect asynchronously; publish until the first message arrives.
        var got: [[UInt8]]?
        try await waitUntil("a user.* message through the subscription") {
            try pub.send(multipart: [Array("session.revoked".utf8), [0]])
            try pub.send(multipart: [Array("user.created".utf8), [1]])
            got = try sub.receiveMultipart(dontWait: true)
            return got != nil
        }
        #expect(got == [Array("user.created".utf8), [1]])
        while let more = try sub.receiveMultipart(dontWait: true) {
            #expect(more[0] == Array("user.created".utf8))
        }
    }

    @Test("a message over maxMessageSize drops the connection instead of being delivered")
    func maxMessageSize() async throws {
        let pull = try context.socket(.pull)
        try pull.set(.maxMessageSize(100))
        try pull.bind("tcp://127.0.0.1:*")
        let push = try context.socket(.push)
        try push.connect(try pull.lastEndpoint)
        try push.send([UInt8](repeating: 1, count: 1000))
        // Small messages after it, until one arrives (over the connection made again): had the
        // large one been delivered, it would have come first.
        var first: [UInt8]?
        try await waitUntil("a small message after the large one") {
            _ = try push.send([2], dontWait: true)
            first = try pull.receive(dontWait: true)?.bytes
            return first != nil
        }
        #expect(first == [2])
    }

    @Test("context shutdown makes blocking calls fail with ETERM")
    func terminated() throws {
        let ctx = try ZMQContext()
        let s = try ctx.socket(.pull)
        ctx.shutdown()
        do {
            _ = try s.receive()
            Issue.record("receive after shutdown returned")
        } catch let error as ZMQError {
            #expect(error.isTerminated)
        }
    }

    @Test("CURVE key pairs are 32 bytes and round-trip through Z85")
    func curveKeys() throws {
        #expect(ZMQContext.has("curve"))
        let pair = try CurveKeyPair.generate()
        #expect(pair.publicKey.count == 32 && pair.secretKey.count == 32)
        #expect(pair.publicKeyZ85.count == 40)
        #expect(Z85.decode(pair.publicKeyZ85) == pair.publicKey)
        #expect(Z85.decode("not z85 at all ~") == nil)
        #expect(Z85.encode([1, 2, 3]) == nil)
        #expect(Z85.encode([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]) == "HelloWorld")
    }

    @Test("CURVE-secured DEALER/ROUTER carries traffic with the right server key")
    func curveTraffic() throws {
        let server = try CurveKeyPair.generate()
        let client = try CurveKeyPair.generate()
        let router = try context.socket(.router)
        try router.set([.curveServer(true), .curveSecretKey(server.secretKey), .curvePublicKey(server.publicKey)])
        try router.bind("tcp://127.0.0.1:*")
        let dealer = try context.socket(.dealer)
        try dealer.set([.curveServerKey(server.publicKey), .curvePublicKey(client.publicKey), .curveSecretKey(client.secretKey)])
        try dealer.connect(try router.lastEndpoint)
        try dealer.send([5])
        try router.set(.receiveTimeout(2000))
        let frames = try #require(try router.receiveMultipart())
        #expect(frames.last == [5])
    }
}
