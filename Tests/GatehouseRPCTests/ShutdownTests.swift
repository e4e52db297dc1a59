import GatehouseContracts
import GatehouseRPC
import RPCRouting
import Testing

/// Shutdown answers every request the server accepted: with its reply, or with `unavailable`,
/// promptly, never leaving a caller to wait for its deadline.
@Suite("RPC server shutdown")
struct ShutdownTests {
    static let quick = RPCMethod<Ping, Pong>(name: "test.quick")
    static let sleeper = RPCMethod<Ping, Pong>(name: "test.sleeper")
    static let blocked = RPCMethod<Ping, Pong>(name: "test.blocked")

    @Test(
        "in-flight requests get their reply or unavailable, late ones unavailable, well before their deadline",
        arguments: [(RPCServer.HandlerExecutor.ioThread, "tcp"), (.globalPool, "tcp"), (.ioThread, "inproc")])
    func everyAcceptedRequestIsAnswered(executor: RPCServer.HandlerExecutor, transport: String) async throws {
        let finishing = Gate()
        let stuck = Gate()
        defer { stuck.open() }
        var router = RPCRouter()
        // Finishes during the drain.
        router.register(Self.quick) { ping, _ in
            await finishing.wait()
            return Pong(text: ping.text)
        }
        // Would sleep past the drain; cancelled at shutdown.
        router.register(Self.sleeper) { ping, _ in
            try await Task.sleep(for: .seconds(60))
            return Pong(text: ping.text)
        }
        // Ignores cancellation: still running when the server has closed.
        router.register(Self.blocked) { ping, _ in
            await stuck.wait()
            return Pong(text: ping.text)
        }
        let endpoint = transport == "tcp" ? "tcp://127.0.0.1:0" : inprocEndpoint()
        let (server, bound) = try startServer(router, endpoint: endpoint) {
            $0.handlerExecutor = executor
            $0.drainTimeout = .seconds(1)
        }
        let client = try RPCClient(configuration: .init(endpoint: bound))
        let deadline: Duration = .seconds(30)
        func calls(_ method: RPCMethod<Ping, Pong>, _ count: Int) -> [Task<Result<Pong, RPCError>, Never>] {
            (0..<count).map { i in
                Task {
                    do { return .success(try await client.call(method, Ping(text: "\(method.name) \(i)"), timeout: deadline)) } catch let error as RPCError {
                        return .failure(error)
                    } catch {
                        return .failure(RPCError(.internal, "\(error)"))
                    }
                }
            }
        }
        let quick = calls(Self.quick, 16), sleepers = calls(Self.sleeper, 16), blocked = calls(Self.blocked, 16)
        #expect(try await waitUntil { server.inFlight == 48 })

        let stopped = ContinuousClock.now
        server.stop()
        finishing.open()
        for (i, call) in quick.enumerated() {
            #expect(try await call.value.get().text == "test.quick \(i)")
        }
        // A reply sent means the stop was seen (the loop takes commands in order): these are
        // read during the drain and refused at once.
        let late = calls(Self.quick, 8)
        for call in sleepers + blocked + late {
            let outcome = await call.value
            guard case .failure(let error) = outcome else {
                Issue.record("expected unavailable, got \(outcome)")
                continue
            }
            #expect(error.code == .unavailable, "\(error)")
        }
        let answered = ContinuousClock.now - stopped
        #expect(answered < .seconds(5), "every caller answered \(answered) after the stop; their deadline was \(deadline)")
        await server.waitUntilStopped()

        // Cancelled at shutdown, the sleepers end at once; the blocked handlers run on after
        // the loop has gone (on the global executor) and end when released, replies dropped.
        #expect(try await waitUntil { server.inFlight == 16 })
        stuck.open()
        #expect(try await waitUntil { server.inFlight == 0 })
        await client.close()
    }
}
