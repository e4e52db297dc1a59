import GatehouseContracts
import GatehouseRPC
import class GatehouseTestSupport.Gate
import RPCRouting
import Testing

/// Shutdown answers every request the server accepted: with its reply, or with `unavailable`,
/// promptly, never leaving a caller to wait for its deadline.
@Suite("RPC server shutdown")
struct ShutdownTests {
    static let quick = RPCMethod<Ping, Pong>(name: "test.quick")
    static let sleeper = RPCMethod<Ping, Pong>(name: "test.sleeper")
    static let blocked = RPCMethod<Ping, Pong>(name: "test.blocked")

    /// Calls `method` `count` times at once; each task ends with the call's outcome.
    static func calls(
        _ client: RPCClient, _ method: RPCMethod<Ping, Pong>, _ count: Int, timeout: Duration
    ) -> [Task<Result<Pong, RPCError>, Never>] {
        (0..<count).map { i in
            Task {
                do { return .success(try await client.call(method, Ping(text: "\(method.name) \(i)"), timeout: timeout)) } catch let error as RPCError {
                    return .failure(error)
                } catch {
                    return .failure(RPCError(.internal, "\(error)"))
                }
            }
        }
    }

    /// Expects every one of `calls` to have failed `unavailable`.
    static func expectUnavailable(_ calls: [Task<Result<Pong, RPCError>, Never>], sourceLocation: SourceLocation = #_sourceLocation) async {
        for call in calls {
            let outcome = await call.value
            guard case .failure(let error) = outcome else {
                Issue.record("expected unavailable, got \(outcome)", sourceLocation: sourceLocation)
                continue
            }
            #expect(error.code == .unavailable, "\(error)", sourceLocation: sourceLocation)
        }
    }

    @Test(
        "at the drain timeout, requests still in flight are answered unavailable, well before their deadline; their handlers never strand",
        arguments: [(RPCServer.HandlerExecutor.ioThread, "tcp"), (.globalPool, "tcp"), (.ioThread, "inproc")])
    func inFlightAtTheDrainTimeout(executor: RPCServer.HandlerExecutor, transport: String) async throws {
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
            $0.drainTimeout = .seconds(2)
        }
        let client = try RPCClient(configuration: .init(endpoint: bound))
        let deadline: Duration = .seconds(30)
        let quick = Self.calls(client, Self.quick, 16, timeout: deadline)
        let sleepers = Self.calls(client, Self.sleeper, 16, timeout: deadline)
        let blocked = Self.calls(client, Self.blocked, 16, timeout: deadline)
        #expect(try await waitUntil { server.inFlight == 48 })

        let stopped = ContinuousClock.now
        server.stop()
        finishing.open()
        for (i, call) in quick.enumerated() {
            #expect(try await call.value.get().text == "test.quick \(i)")
        }
        await Self.expectUnavailable(sleepers + blocked)
        let answered = ContinuousClock.now - stopped
        #expect(answered < .seconds(10), "every caller answered \(answered) after the stop; their deadline was \(deadline)")
        await server.waitUntilStopped()

        // Cancelled at shutdown, the sleepers end at once; the blocked handlers run on after
        // the loop has gone (on the global executor) and end when released, replies dropped.
        #expect(try await waitUntil { server.inFlight == 16 })
        stuck.open()
        #expect(try await waitUntil { server.inFlight == 0 })
        await client.close()
    }

    @Test("requests that arrive during the drain are answered unavailable at once, without running")
    func arrivingDuringTheDrain() async throws {
        let holding = Gate()
        let ran = DeadlineTests.Recorded(0)
        var router = RPCRouter()
        // Keeps the drain open until the test is done with it.
        router.register(Self.blocked) { ping, _ in
            await holding.wait()
            return Pong(text: ping.text)
        }
        router.register(Self.quick) { ping, _ in
            ran.update { $0 += 1 }
            return Pong(text: ping.text)
        }
        let (server, bound) = try startServer(router, endpoint: "tcp://127.0.0.1:0") { $0.drainTimeout = .seconds(30) }
        let client = try RPCClient(configuration: .init(endpoint: bound))
        let held = Self.calls(client, Self.blocked, 1, timeout: .seconds(30))
        #expect(try await waitUntil { server.inFlight == 1 })
        server.stop()
        // A request refused means the stop was seen (the loop reads, then takes its commands):
        // call until one is, then every call after it must be too.
        var refused = false
        for _ in 0..<200 where !refused {
            if case .failure(let error) = await Self.calls(client, Self.quick, 1, timeout: .seconds(30))[0].value {
                #expect(error.code == .unavailable, "\(error)")
                refused = true
            }
        }
        #expect(refused)
        let before = ran.current
        let start = ContinuousClock.now
        await Self.expectUnavailable(Self.calls(client, Self.quick, 16, timeout: .seconds(30)))
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(ran.current == before)
        // The request in flight still gets its answer when its handler finishes.
        holding.open()
        #expect(try await held[0].value.get().text == "test.blocked 0")
        await server.waitUntilStopped()
        await client.close()
    }
}
