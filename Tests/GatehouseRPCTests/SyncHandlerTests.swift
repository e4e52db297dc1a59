import Foundation
import GatehouseContracts
import GatehouseRPC
import Synchronization
import Testing
import RPCRouting
import GatehouseSupport

/// Handlers registered with `registerSync` answer on the server's I/O thread, without a task,
/// with the same wire behaviour as asynchronous ones.
@Suite("Synchronous handlers")
struct SyncHandlerTests {
    static let syncEcho = RPCMethod<Ping, Pong>(name: "test.syncEcho")
    static let syncFail = RPCMethod<Ping, Pong>(name: "test.syncFail")
    static let syncCrash = RPCMethod<Ping, Pong>(name: "test.syncCrash")
    static let whereAmI = RPCMethod<Ping, Pong>(name: "test.whereAmI")

    static func router() -> RPCRouter {
        var router = testRouter()
        router.registerSync(syncEcho) { ping, context in Pong(text: "\(context.method):\(ping.text)") }
        router.registerSync(syncFail) { ping, _ in throw RPCError("email_exists", "taken", details: ["field": ping.text]) }
        router.registerSync(syncCrash) { _, _ in throw SomeInternalError() }
        router.registerSync(whereAmI) { _, _ in Pong(text: ThreadName.current) }
        return router
    }

    @Test("answers, errors and malformed bodies over inproc and tcp", arguments: ["inproc", "tcp"])
    func wireBehaviour(transport: String) async throws {
        let endpoint = transport == "inproc" ? inprocEndpoint() : "tcp://127.0.0.1:0"
        let (server, bound) = try startServer(Self.router(), endpoint: endpoint)
        let client = try RPCClient(configuration: .init(endpoint: bound))
        #expect(try await client.call(Self.syncEcho, Ping(text: "héllo")) == Pong(text: "test.syncEcho:héllo"))
        do {
            _ = try await client.call(Self.syncFail, Ping(text: "email"))
            Issue.record("expected an error")
        } catch let error as RPCError {
            #expect(error.code.rawValue == "email_exists")
            #expect(error.details["field"] == "email")
        }
        await #expect(throws: RPCError(.internal, "internal error")) { _ = try await client.call(Self.syncCrash, Ping(text: "")) }
        // A body that does not decode as `Ping` (field 1 with the varint wire type).
        struct Wrong: Codable, Sendable {
            var text: Int64 = 1
            enum CodingKeys: Int, CodingKey { case text = 1 }
        }
        let garbage = RPCMethod<Wrong, Pong>(name: Self.syncEcho.name)
        do {
            _ = try await client.call(garbage, Wrong())
            Issue.record("expected malformed_request")
        } catch let error as RPCError {
            #expect(error.code == .malformedRequest)
        }
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("they run on the server's I/O thread; with the global-pool executor, on the pool")
    func threads() async throws {
        let (server, bound) = try startServer(Self.router(), endpoint: inprocEndpoint())
        let (poolServer, poolBound) = try startServer(Self.router(), endpoint: inprocEndpoint("pool")) { $0.handlerExecutor = .globalPool }
        let client = try RPCClient(configuration: .init(endpoint: bound))
        let poolClient = try RPCClient(configuration: .init(endpoint: poolBound))
        #expect(try await client.call(Self.whereAmI, Ping(text: "")).text.hasPrefix("rpcs"))
        #expect(try await !poolClient.call(Self.whereAmI, Ping(text: "")).text.hasPrefix("rpcs"))
        await client.close()
        await poolClient.close()
        server.stop()
        poolServer.stop()
        await server.waitUntilStopped()
        await poolServer.waitUntilStopped()
    }

    @Test("64 callers back to back, mixed with asynchronous handlers")
    func pipelined() async throws {
        let (server, bound) = try startServer(Self.router(), endpoint: inprocEndpoint())
        let client = try RPCClient(configuration: .init(endpoint: bound))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<64 {
                group.addTask {
                    for i in 0..<100 {
                        let method = i % 2 == 0 ? Self.syncEcho : TestAPI.echo
                        let pong = try await client.call(method, Ping(text: "\(t).\(i)"), timeout: .seconds(5))
                        #expect(pong.text.hasSuffix("\(t).\(i)"))
                    }
                }
            }
            try await group.waitForAll()
        }
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("a local caller and a merged router reach synchronous handlers too")
    func localAndMerged() async throws {
        var merged = RPCRouter()
        merged.merge(Self.router())
        #expect(merged.syncHandler(for: Self.syncEcho.name) != nil)
        #expect(merged.syncHandler(for: TestAPI.echo.name) == nil)
        let local = LocalCaller(router: merged)
        #expect(try await local.call(Self.syncEcho, Ping(text: "x")) == Pong(text: "test.syncEcho:x"))
        // Registering an asynchronous handler under the same name replaces the synchronous one.
        merged.register(Self.syncEcho) { ping, _ in Pong(text: "async:" + ping.text) }
        #expect(merged.syncHandler(for: Self.syncEcho.name) == nil)
        #expect(try await LocalCaller(router: merged).call(Self.syncEcho, Ping(text: "y")) == Pong(text: "async:y"))
    }
}
