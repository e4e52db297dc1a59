import Foundation
import GatehouseContracts
import GatehouseRPC
import Testing
import ZeroMQ
import RPCRouting

@Suite("RPC over real ZeroMQ sockets")
struct RPCTests {
    @Test("echo over inproc and tcp", arguments: ["inproc", "tcp"])
    func echo(transport: String) async throws {
        let endpoint = transport == "inproc" ? inprocEndpoint() : "tcp://127.0.0.1:0"
        let (server, bound) = try startServer(testRouter(), endpoint: endpoint)
        let client = try RPCClient(configuration: .init(endpoint: bound))
        let pong = try await client.call(TestAPI.echo, Ping(text: "héllo"))
        #expect(pong == Pong(text: "héllo"))
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("many calls in flight on one client are matched to their replies")
    func concurrentCalls() async throws {
        let (server, bound) = try startServer(testRouter(), endpoint: "tcp://127.0.0.1:0")
        let client = try RPCClient(configuration: .init(endpoint: bound))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<1000 {
                group.addTask {
                    let pong = try await client.call(TestAPI.echo, Ping(text: "\(i)", delayMs: UInt32(i % 3)))
                    #expect(pong.text == "\(i)")
                }
            }
            try await group.waitForAll()
        }
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("64 tasks making calls back to back never lose a wake-up", arguments: [RPCServer.HandlerExecutor.ioThread, .globalPool])
    func pipelined(executor: RPCServer.HandlerExecutor) async throws {
        let (server, bound) = try startServer(testRouter(), endpoint: inprocEndpoint()) { $0.handlerExecutor = executor }
        let client = try RPCClient(configuration: .init(endpoint: bound))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<64 {
                group.addTask {
                    for i in 0..<100 {
                        let pong = try await client.call(TestAPI.echo, Ping(text: "\(t).\(i)"), timeout: .seconds(5))
                        #expect(pong.text == "\(t).\(i)")
                    }
                }
            }
            try await group.waitForAll()
        }
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("errors travel as code, message and details; unknown errors become internal")
    func errors() async throws {
        let (server, bound) = try startServer(testRouter(), endpoint: inprocEndpoint())
        let client = try RPCClient(configuration: .init(endpoint: bound))
        await #expect(throws: RPCError("email_exists", "that address is taken", details: ["field": "x"])) {
            try await client.call(TestAPI.fail, Ping(text: "x"))
        }
        await #expect(throws: RPCError(.internal, "internal error")) {
            try await client.call(TestAPI.crash, Ping(text: "x"))
        }
        do {
            _ = try await client.call(TestAPI.missing, Ping(text: "x"))
            Issue.record("an unknown method succeeded")
        } catch let error as RPCError {
            #expect(error.code == .unimplemented)
            #expect(error.message.contains("test.missing"))
        }
        // The server still serves after all of that.
        #expect(try await client.call(TestAPI.echo, Ping(text: "ok")).text == "ok")
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("a call past its deadline fails with deadline_exceeded, not later than needed")
    func deadline() async throws {
        let (server, bound) = try startServer(testRouter(), endpoint: inprocEndpoint()) { $0.drainTimeout = .milliseconds(10) }
        let client = try RPCClient(configuration: .init(endpoint: bound))
        let start = ContinuousClock.now
        await #expect(throws: RPCError.self) {
            try await client.call(TestAPI.echo, Ping(text: "slow", delayMs: 3000), timeout: .milliseconds(100))
        }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .milliseconds(2000))
        do {
            _ = try await client.call(TestAPI.echo, Ping(text: "slow", delayMs: 3000), timeout: .milliseconds(50))
        } catch let error as RPCError {
            #expect(error.code == .deadlineExceeded)
        }
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("a call to an endpoint with no server fails with unavailable within its deadline")
    func noServer() async throws {
        let endpoint = try freeTCPEndpoint()
        let client = try RPCClient(configuration: .init(endpoint: endpoint))
        let start = ContinuousClock.now
        do {
            _ = try await client.call(TestAPI.echo, Ping(text: "x"), timeout: .milliseconds(200))
            Issue.record("a call with no server succeeded")
        } catch let error as RPCError {
            #expect(error.code == .unavailable)
        }
        #expect(ContinuousClock.now - start < .seconds(1))
        await client.close()
    }

    @Test("cancelling the calling task fails the call with cancelled at once")
    func cancellation() async throws {
        let (server, bound) = try startServer(testRouter(), endpoint: inprocEndpoint())
        let client = try RPCClient(configuration: .init(endpoint: bound))
        let task = Task { try await client.call(TestAPI.echo, Ping(text: "slow", delayMs: 800), timeout: .seconds(10)) }
        #expect(try await waitUntil { server.inFlight == 1 })
        let start = ContinuousClock.now
        task.cancel()
        do {
            _ = try await task.value
            Issue.record("a cancelled call succeeded")
        } catch let error as RPCError {
            #expect(error.code == .cancelled)
        }
        #expect(ContinuousClock.now - start < .seconds(1))
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("a client survives the server restarting on the same endpoint")
    func serverRestart() async throws {
        let endpoint = try freeTCPEndpoint()
        let (first, _) = try startServer(testRouter(tag: "1:"), endpoint: endpoint)
        let client = try RPCClient(configuration: .init(endpoint: endpoint))
        #expect(try await client.call(TestAPI.echo, Ping(text: "a")).text == "1:a")
        first.stop()
        await first.waitUntilStopped()
        let second = try await restartServer(testRouter(tag: "2:"), endpoint: endpoint)
        // libzmq closes the old server's connection in the background: a call made before the
        // client has seen it go can still be written to it and be lost (its caller times out).
        // The client must find the new server by itself.
        var answer: String?
        let giveUp = ContinuousClock.now + .seconds(10)
        while answer == nil && ContinuousClock.now < giveUp {
            answer = try? await client.call(TestAPI.echo, Ping(text: "b"), timeout: .seconds(1)).text
        }
        #expect(answer == "2:b")
        await client.close()
        second.stop()
        await second.waitUntilStopped()
    }

    @Test("only idempotent calls are retried when a server dies mid-call")
    func idempotentRetry() async throws {
        let endpoint = try freeTCPEndpoint()
        // The first server never answers in time and is replaced by one that does.
        var slowRouter = RPCRouter()
        slowRouter.register(TestAPI.echoIdempotent) { _, _ in
            try await Task.sleep(for: .seconds(30))
            return Pong(text: "never")
        }
        slowRouter.register(TestAPI.echo) { _, _ in
            try await Task.sleep(for: .seconds(30))
            return Pong(text: "never")
        }
        let (slow, _) = try startServer(slowRouter, endpoint: endpoint) { $0.drainTimeout = .milliseconds(10) }
        let client = try RPCClient(configuration: .init(endpoint: endpoint))
        async let idempotent = client.call(TestAPI.echoIdempotent, Ping(text: "i"), timeout: .seconds(3))
        async let plain = client.call(TestAPI.echo, Ping(text: "p"), timeout: .seconds(3))
        #expect(try await waitUntil { slow.inFlight == 2 })
        slow.stop()
        await slow.waitUntilStopped()
        let fast = try await restartServer(testRouter(tag: "fast:"), endpoint: endpoint)
        #expect(try await idempotent.text == "fast:i")
        do {
            _ = try await plain
            Issue.record("a non-idempotent call was retried")
        } catch let error as RPCError {
            // The slow server gave up on it at its drain timeout, and said so.
            #expect(error.code == .unavailable)
        }
        await client.close()
        fast.stop()
        await fast.waitUntilStopped()
    }

    @Test("past maxInFlight, requests are answered overloaded at once")
    func overload() async throws {
        let (server, bound) = try startServer(testRouter(), endpoint: inprocEndpoint()) { $0.maxInFlight = 2 }
        let client = try RPCClient(configuration: .init(endpoint: bound))
        async let a = client.call(TestAPI.echo, Ping(text: "a", delayMs: 500), timeout: .seconds(10))
        async let b = client.call(TestAPI.echo, Ping(text: "b", delayMs: 500), timeout: .seconds(10))
        #expect(try await waitUntil { server.inFlight == 2 })
        do {
            _ = try await client.call(TestAPI.echo, Ping(text: "c"))
            Issue.record("a request past maxInFlight was served")
        } catch let error as RPCError {
            #expect(error.code == .overloaded)
        }
        #expect(try await a.text == "a")
        #expect(try await b.text == "b")
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("graceful shutdown finishes in-flight requests and sends their replies")
    func gracefulShutdown() async throws {
        let (server, bound) = try startServer(testRouter(), endpoint: inprocEndpoint())
        let client = try RPCClient(configuration: .init(endpoint: bound))
        async let slow = client.call(TestAPI.echo, Ping(text: "drained", delayMs: 300), timeout: .seconds(10))
        #expect(try await waitUntil { server.inFlight == 1 })
        server.stop()
        #expect(try await slow.text == "drained")
        await server.waitUntilStopped()
        // After shutdown nothing answers.
        await #expect(throws: RPCError.self) {
            try await client.call(TestAPI.echo, Ping(text: "late"), timeout: .milliseconds(100))
        }
        await client.close()
    }

    @Test("a closed client fails calls with unavailable")
    func closedClient() async throws {
        let client = try RPCClient(configuration: .init(endpoint: inprocEndpoint()))
        await client.close()
        do {
            _ = try await client.call(TestAPI.echo, Ping(text: "x"))
            Issue.record("a closed client made a call")
        } catch let error as RPCError {
            #expect(error.code == .unavailable)
        }
    }

    @Test("LocalCaller serves a router in process with the same error mapping")
    func localCaller() async throws {
        let caller = LocalCaller(router: testRouter())
        #expect(try await caller.call(TestAPI.echo, Ping(text: "x")).text == "x")
        await #expect(throws: RPCError(.internal, "internal error")) { try await caller.call(TestAPI.crash, Ping(text: "x")) }
    }
}
