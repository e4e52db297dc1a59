import GatehouseContracts
import GatehouseRPC
import RPCRouting
import Synchronization
import Testing

/// A client over tcp follows its connection: replies that arrived are never lost when the
/// server closes behind them, and a request made while no server is there never reaches a
/// server started later.
@Suite("RPC client: the connection")
struct ConnectionTests {
    @Test(
        "a reply sent just before the server closes reaches its caller, every time",
        arguments: [RPCServer.HandlerExecutor.ioThread, .globalPool])
    func lastReplyBeforeClose(executor: RPCServer.HandlerExecutor) async throws {
        // The server stops while the call is in flight, so its reply is the last thing it sends
        // before closing. With ZMQ_IMMEDIATE the client lost about one such reply in ten (libzmq
        // dropped it with the connection before the client had read it); 40 rounds.
        var lost: [String] = []
        for round in 0..<40 {
            let gate = Gate()
            var router = RPCRouter()
            router.register(TestAPI.echo) { ping, _ in
                await gate.wait()
                return Pong(text: ping.text)
            }
            let (server, endpoint) = try startServer(router, endpoint: "tcp://127.0.0.1:0") { $0.handlerExecutor = executor }
            let client = try RPCClient(configuration: .init(endpoint: endpoint))
            let call = Task { try await client.call(TestAPI.echo, Ping(text: "\(round)"), timeout: .seconds(5)) }
            #expect(try await waitUntil { server.inFlight == 1 })
            server.stop()
            gate.open()
            do {
                #expect(try await call.value.text == "\(round)")
            } catch {
                lost.append("round \(round): \(error)")
            }
            await server.waitUntilStopped()
            await client.close()
        }
        #expect(lost.isEmpty, "\(lost)")
    }

    @Test("a call made while the service is away is never delivered to a server started later")
    func noLateDelivery() async throws {
        let endpoint = try freeTCPEndpoint()
        let first = try await restartServer(testRouter(), endpoint: endpoint)
        let client = try RPCClient(configuration: .init(endpoint: endpoint))
        #expect(try await client.call(TestAPI.echo, Ping(text: "before")).text == "before")
        first.stop()
        await first.waitUntilStopped()
        // No server. A call made before the client has seen the connection go may be handed to
        // libzmq and dropped with it (`deadline_exceeded`); once the client has seen it, a call
        // waits in the client and fails `unavailable` at its deadline. Call until one does.
        var awayCalls = 0
        var waitedInClient = false
        while !waitedInClient && awayCalls < 20 {
            awayCalls += 1
            do {
                _ = try await client.call(TestAPI.echo, Ping(text: "while away \(awayCalls)"), timeout: .milliseconds(200))
                Issue.record("a call with no server succeeded")
            } catch let error as RPCError {
                #expect(error.code == .unavailable || error.code == .deadlineExceeded)
                waitedInClient = error.code == .unavailable
            }
        }
        #expect(waitedInClient)
        let seen = Mutex<[String]>([])
        var router = RPCRouter()
        router.register(TestAPI.echo) { ping, _ in
            seen.withLock { $0.append(ping.text) }
            return Pong(text: ping.text)
        }
        let second = try await restartServer(router, endpoint: endpoint)
        #expect(try await client.call(TestAPI.echo, Ping(text: "after"), timeout: .seconds(5)).text == "after")
        // Left to itself, libzmq without ZMQ_IMMEDIATE queues requests for a connection that is
        // gone and sends them to the next server, however late.
        #expect(seen.withLock { $0 } == ["after"])
        await client.close()
        second.stop()
        await second.waitUntilStopped()
    }
}
