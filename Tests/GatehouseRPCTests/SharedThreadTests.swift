import Foundation
import GatehouseProtocol
import GatehouseRPC
import Synchronization
import Testing

/// Clients that share a server's I/O thread (`RPCThread`): a handler calling another service
/// through such a client is resumed on the server's own thread, without a thread of the client's.
@Suite("Clients sharing a server's thread")
struct SharedThreadTests {
    static let relay = RPCMethod<Ping, Pong>(name: "test.relay")

    /// Names of this process's threads.
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .newlines) }
    }

    /// A front server whose `relay` handler calls the back server's echo through a client that
    /// shares the front server's thread, and reports the threads it ran on.
    static func front(backEndpoint: String, frontEndpoint: String) throws -> (RPCServer, RPCClient, String) {
        let thread = try RPCThread()
        let back = try RPCClient(configuration: .init(endpoint: backEndpoint), sharing: thread)
        var router = RPCRouter()
        router.register(relay) { ping, _ in
            let before = ThreadName.current
            let pong = try await back.call(SyncHandlerTests.syncEcho, ping, timeout: .seconds(5))
            return Pong(text: "\(before)|\(ThreadName.current)|\(pong.text)")
        }
        let server = try RPCServer(router: router, configuration: .init(endpoints: [frontEndpoint]), thread: thread)
        let bound = try server.start()
        return (server, back, bound[0])
    }

    @Test("a handler's call through a shared client resumes on the server's thread; the client has no thread", arguments: ["inproc", "tcp"])
    func resumesOnTheServerThread(transport: String) async throws {
        let backEndpoint = transport == "inproc" ? inprocEndpoint("back") : "tcp://127.0.0.1:0"
        let (backServer, backBound) = try startServer(SyncHandlerTests.router(), endpoint: backEndpoint)
        let frontName = "front\(UInt32.random(in: 0...UInt32.max))"
        let (front, shared, frontBound) = try Self.front(backEndpoint: backBound, frontEndpoint: "inproc://\(frontName)")
        let caller = try RPCClient(configuration: .init(endpoint: frontBound))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<16 {
                group.addTask {
                    for i in 0..<25 {
                        let reply = try await caller.call(Self.relay, Ping(text: "\(t).\(i)"), timeout: .seconds(5))
                        let parts = reply.text.split(separator: "|").map(String.init)
                        #expect(parts.count == 3)
                        #expect(parts[0] == parts[1], "resumed on another thread: \(reply.text)")
                        #expect(parts[0].hasPrefix("rpcs"))
                        #expect(parts[2] == "test.syncEcho:\(t).\(i)")
                    }
                }
            }
            try await group.waitForAll()
        }
        // The shared client has no I/O thread of its own ("rpcc <endpoint tail>").
        let tail = String(backBound.split(whereSeparator: { $0 == "/" || $0 == ":" }).last ?? "")
        #expect(!Self.threadNames().contains { $0.hasPrefix("rpcc") && $0.contains(tail.prefix(10)) })
        await caller.close()
        front.stop()
        await front.waitUntilStopped()
        await shared.close()
        backServer.stop()
        await backServer.waitUntilStopped()
    }

    @Test("deadlines, closing the shared client, and the server stopping")
    func lifecycle() async throws {
        let (backServer, backBound) = try startServer(testRouter(), endpoint: inprocEndpoint("back"))
        let thread = try RPCThread()
        let shared = try RPCClient(configuration: .init(endpoint: backBound), sharing: thread)
        let spare = try RPCClient(configuration: .init(endpoint: backBound), sharing: thread)
        var router = RPCRouter()
        router.register(TestAPI.echo) { ping, _ in
            try await shared.call(TestAPI.echo, ping, timeout: .milliseconds(100))
        }
        let front = try RPCServer(router: router, configuration: .init(endpoints: [inprocEndpoint("front")]), thread: thread)
        // A thread serves one server.
        #expect(throws: RPCError.self) {
            _ = try RPCServer(router: RPCRouter(), configuration: .init(endpoints: [inprocEndpoint("other")]), thread: thread)
        }
        let frontBound = try front.start()[0]
        let caller = try RPCClient(configuration: .init(endpoint: frontBound))
        #expect(try await caller.call(TestAPI.echo, Ping(text: "quick")) == Pong(text: "quick"))
        // The shared client's deadline is kept by the server's loop.
        let started = ContinuousClock.now
        do {
            _ = try await caller.call(TestAPI.echo, Ping(text: "slow", delayMs: 2_000), timeout: .seconds(5))
            Issue.record("expected deadline_exceeded")
        } catch let error as RPCError {
            #expect(error.code == .deadlineExceeded)
        }
        #expect(ContinuousClock.now - started < .seconds(1))
        // Closing one shared client leaves the server and the other client working.
        await spare.close()
        await #expect(throws: RPCError.self) { _ = try await spare.call(TestAPI.echo, Ping(text: "x")) }
        #expect(try await caller.call(TestAPI.echo, Ping(text: "still")) == Pong(text: "still"))
        // A call waiting when the server stops fails `unavailable`; later calls too, and a
        // client asking to share the stopped thread is refused.
        let waiting = Task { try await shared.call(TestAPI.echo, Ping(text: "slow", delayMs: 2_000), timeout: .seconds(5)) }
        try await Task.sleep(for: .milliseconds(20))
        front.stop()
        await front.waitUntilStopped()
        do {
            _ = try await waiting.value
            Issue.record("expected unavailable")
        } catch let error as RPCError {
            #expect(error.code == .unavailable)
        }
        await #expect(throws: RPCError.self) { _ = try await shared.call(TestAPI.echo, Ping(text: "x")) }
        await shared.close()
        #expect(throws: RPCError.self) { _ = try RPCClient(configuration: .init(endpoint: backBound), sharing: thread) }
        await caller.close()
        backServer.stop()
        await backServer.waitUntilStopped()
    }
}
