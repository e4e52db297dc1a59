import Foundation
import GatehouseContracts
import GatehouseRPC
import ProtoCodec
import RPCRouting
import Synchronization
import Testing
import ZeroMQ

/// Deadlines travel with every hop: a handler calling the next service hands on what is left of
/// its own caller's budget, and work whose budget is spent is never started.
@Suite("Deadlines across hops")
struct DeadlineTests {
    static let first = RPCMethod<Ping, Pong>(name: "test.first")
    static let second = RPCMethod<Ping, Pong>(name: "test.second")

    /// A value handlers write and the test reads.
    final class Recorded<Value: Sendable>: Sendable {
        private let value: Mutex<Value>
        /// Starts with `value`.
        init(_ value: Value) { self.value = Mutex(value) }
        /// Changes the value under the lock.
        func update(_ body: (inout Value) -> Void) { value.withLock { body(&$0) } }
        /// The value now.
        var current: Value { value.withLock { $0 } }
    }

    /// The second service: records each call's deadline as its handler saw it.
    final class Second: Sendable {
        let deadlines: Recorded<[ContinuousClock.Instant]>
        let server: RPCServer
        let endpoint: String

        init() throws {
            var router = RPCRouter()
            let deadlines = Recorded<[ContinuousClock.Instant]>([])
            self.deadlines = deadlines
            router.register(DeadlineTests.second) { ping, context in
                deadlines.update { $0.append(context.deadline) }
                return Pong(text: "second:" + ping.text)
            }
            (server, endpoint) = try startServer(router, endpoint: "tcp://127.0.0.1:0")
        }
    }

    /// The first service: waits `delayMs`, then calls the second within its own context, like
    /// the identity service's sign-in calling the token service. Records its deadline and what
    /// the second call did.
    final class First: Sendable {
        let deadline: Recorded<ContinuousClock.Instant?>
        let secondCall: Recorded<Result<Pong, RPCError>?>
        let server: RPCServer
        let endpoint: String
        let toSecond: RPCClient

        init(second: Second) throws {
            // A fresh budget would be this client's default: 2 s.
            let toSecond = try RPCClient(configuration: .init(endpoint: second.endpoint))
            self.toSecond = toSecond
            var router = RPCRouter()
            let deadline = Recorded<ContinuousClock.Instant?>(nil), secondCall = Recorded<Result<Pong, RPCError>?>(nil)
            self.deadline = deadline
            self.secondCall = secondCall
            router.register(DeadlineTests.first) { ping, context in
                deadline.update { $0 = context.deadline }
                try await Task.sleep(for: .milliseconds(ping.delayMs))
                do {
                    let pong = try await toSecond.call(DeadlineTests.second, ping, within: context)
                    secondCall.update { $0 = .success(pong) }
                    return pong
                } catch let error as RPCError {
                    secondCall.update { $0 = .failure(error) }
                    throw error
                }
            }
            (server, endpoint) = try startServer(router, endpoint: "tcp://127.0.0.1:0")
        }
    }

    func stop(_ servers: RPCServer...) async {
        for server in servers {
            server.stop()
            await server.waitUntilStopped()
        }
    }

    @Test("the second hop gets what is left of the first hop's deadline, not a fresh budget")
    func remainingBudgetTravels() async throws {
        let second = try Second()
        let first = try First(second: second)
        let client = try RPCClient(configuration: .init(endpoint: first.endpoint))
        let pong = try await client.call(Self.first, Ping(text: "a", delayMs: 200), timeout: .seconds(1))
        #expect(pong.text == "second:a")
        let firstDeadline = try #require(first.deadline.current)
        let secondDeadline = try #require(second.deadlines.current.first)
        // The wire carries whole milliseconds, counted from receipt: the second deadline may
        // lie after the first by the transit time, never by a fresh budget (~1.2 s here).
        #expect(secondDeadline <= firstDeadline + .milliseconds(50), "second hop's deadline is \(firstDeadline.duration(to: secondDeadline)) after the first's")
        #expect(secondDeadline > firstDeadline - .milliseconds(50))
        await client.close()
        await first.toSecond.close()
        await stop(first.server, second.server)
    }

    @Test("a call made after its caller's deadline is refused at once: not sent, its handler never runs")
    func spentBudgetIsNotSent() async throws {
        let second = try Second()
        let first = try First(second: second)
        let client = try RPCClient(configuration: .init(endpoint: first.endpoint))
        // The first hop is still sleeping when its caller gives up; then its budget is spent.
        do {
            _ = try await client.call(Self.first, Ping(text: "late", delayMs: 300), timeout: .milliseconds(100))
            Issue.record("a call past its deadline succeeded")
        } catch let error as RPCError {
            #expect(error.code == .deadlineExceeded)
        }
        #expect(try await waitUntil { first.secondCall.current != nil })
        let outcome = try #require(first.secondCall.current)
        guard case .failure(let error) = outcome else {
            Issue.record("the second hop ran after the first hop's deadline: \(outcome)")
            return
        }
        #expect(error.code == .deadlineExceeded)
        #expect(second.deadlines.current.isEmpty)
        // In process too.
        let ranLocally = Recorded(false)
        var local = RPCRouter()
        local.register(Self.second) { ping, _ in
            ranLocally.update { $0 = true }
            return Pong(text: ping.text)
        }
        await #expect(throws: RPCError.deadlinePassed(Self.second.name)) {
            try await LocalCaller(router: local).call(Self.second, Ping(text: "x"), deadline: .now - .milliseconds(1))
        }
        #expect(!ranLocally.current)
        await client.close()
        await first.toSecond.close()
        await stop(first.server, second.server)
    }

    @Test("a request whose deadline passes while it waits in the server is answered deadline_exceeded without running")
    func expiredInServerQueue() async throws {
        let ran = Mutex<[String]>([])
        var router = RPCRouter()
        // Holds the I/O thread while the other two requests arrive behind it.
        router.registerSync(RPCMethod<Ping, Pong>(name: "test.hold")) { ping, _ in
            usleep(UInt32(ping.delayMs) * 1000)
            ran.withLock { $0.append("hold") }
            return Pong(text: "held")
        }
        // Started first of the two, it keeps the I/O thread (where handlers start) busy past
        // the third request's deadline.
        router.register(RPCMethod<Ping, Pong>(name: "test.hog")) { ping, _ in
            usleep(UInt32(ping.delayMs) * 1000)
            ran.withLock { $0.append("hog") }
            return Pong(text: "hogged")
        }
        router.register(TestAPI.echo) { ping, _ in
            ran.withLock { $0.append("echo") }
            return Pong(text: ping.text)
        }
        let (server, endpoint) = try startServer(router, endpoint: inprocEndpoint())
        let dealer = try ZMQContext.shared.socket(.dealer)
        try dealer.set(.linger(0))
        try dealer.connect(endpoint)
        func send(_ id: UInt64, _ method: String, timeoutMs: UInt32, delayMs: UInt32) throws {
            let header = RequestHeader(version: 1, requestID: id, method: method, timeoutMs: timeoutMs, traceParent: "")
            try dealer.send(multipart: [try ProtobufEncoder().encode(header), try ProtobufEncoder().encode(Ping(text: "\(id)", delayMs: delayMs))])
        }
        try send(1, "test.hold", timeoutMs: 10_000, delayMs: 100)
        try send(2, "test.hog", timeoutMs: 10_000, delayMs: 100)
        try send(3, "test.echo", timeoutMs: 20, delayMs: 0)
        // Polled, not waited for: a blocking receive would hold one of the pool's threads.
        var replies: [UInt64: ReplyHeader] = [:]
        #expect(try await waitUntil(timeout: .seconds(5)) {
            while let frames = try? dealer.receiveMultipart(dontWait: true) {
                if let header = try? ProtobufDecoder().decode(ReplyHeader.self, from: frames[0]) { replies[header.requestID] = header }
            }
            return replies.count == 3
        }, "a request got no reply")
        #expect(replies[1]?.error == nil)
        #expect(replies[2]?.error == nil)
        #expect(replies[3]?.error?.code == .deadlineExceeded)
        #expect(ran.withLock { $0 } == ["hold", "hog"])
        dealer.close()
        await stop(server)
    }
}
