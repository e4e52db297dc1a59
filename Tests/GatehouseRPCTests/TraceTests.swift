import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import RPCRouting
import Testing

/// The caller's W3C trace travels with every call over real sockets, through a service that
/// calls another, and a request that comes without one gets a trace of its own.
@Suite("Trace context across hops")
struct TraceTests {
    static let first = RPCMethod<Ping, Pong>(name: "test.first")
    static let second = RPCMethod<Ping, Pong>(name: "test.second")
    static let syncSecond = RPCMethod<Ping, Pong>(name: "test.syncSecond")

    /// What a handler saw: the context's trace and the task's.
    struct Seen: Sendable, Equatable {
        /// `RPCContext.trace`.
        var context: TraceParent?
        /// `TraceContext.current` in the handler.
        var task: TraceParent?
    }

    @Test("a trace bound by the caller reaches the first service, the service it calls, and a synchronous handler")
    func travels() async throws {
        let seen = DeadlineTests.Recorded<[String: Seen]>([:])
        var secondRouter = RPCRouter()
        secondRouter.register(Self.second) { ping, context in
            seen.update { $0["second"] = Seen(context: context.trace, task: TraceContext.current) }
            return Pong(text: ping.text)
        }
        secondRouter.registerSync(Self.syncSecond) { ping, context in
            seen.update { $0["syncSecond"] = Seen(context: context.trace, task: TraceContext.current) }
            return Pong(text: ping.text)
        }
        let (second, secondEndpoint) = try startServer(secondRouter, endpoint: "tcp://127.0.0.1:0")
        let toSecond = try RPCClient(configuration: .init(endpoint: secondEndpoint))
        var firstRouter = RPCRouter()
        firstRouter.register(Self.first) { ping, context in
            seen.update { $0["first"] = Seen(context: context.trace, task: TraceContext.current) }
            _ = try await toSecond.call(Self.second, ping, within: context)
            // Without `within:`: the trace is the task's, bound by the server.
            return try await toSecond.call(Self.syncSecond, ping, deadline: context.deadline)
        }
        let (first, firstEndpoint) = try startServer(firstRouter, endpoint: "tcp://127.0.0.1:0")
        let client = try RPCClient(configuration: .init(endpoint: firstEndpoint))

        let trace = try #require(TraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        _ = try await TraceContext.$current.withValue(trace) {
            try await client.call(Self.first, Ping(text: "x"), timeout: .seconds(5))
        }
        let traced = seen.current
        #expect(traced["first"] == Seen(context: trace, task: trace))
        #expect(traced["second"] == Seen(context: trace, task: trace))
        // A synchronous handler answers on the I/O thread, without a task to bind it to.
        #expect(traced["syncSecond"] == Seen(context: trace, task: nil))

        // No trace from the caller: the first service starts one, and passes it on.
        seen.update { $0 = [:] }
        _ = try await client.call(Self.first, Ping(text: "y"), timeout: .seconds(5))
        let started = try #require(seen.current["first"]?.context)
        #expect(started != trace)
        #expect(seen.current["second"] == Seen(context: started, task: started))
        #expect(seen.current["syncSecond"]?.context == started)

        await client.close()
        await toSecond.close()
        for server in [first, second] {
            server.stop()
            await server.waitUntilStopped()
        }
    }
}
