import Foundation
import GatehouseContracts
@testable import GatehouseRPC
import RPCRouting
import Testing
import GatehouseSupport

/// Callers that run on an `RPCClient`'s own I/O thread (`client.executor`).
@Suite("Client executor")
struct ClientExecutorTests {
    @Test("a caller on the client's executor is resumed on its I/O thread, over inproc and tcp", arguments: ["inproc", "tcp"])
    func resumesOnTheIOThread(transport: String) async throws {
        let endpoint = transport == "inproc" ? inprocEndpoint() : "tcp://127.0.0.1:0"
        let (server, bound) = try startServer(SyncHandlerTests.router(), endpoint: endpoint)
        let client = try RPCClient(configuration: .init(endpoint: bound))
        let threads = try await withTaskExecutorPreference(client.executor) {
            var seen: [String] = []
            for i in 0..<50 {
                let method = i % 2 == 0 ? SyncHandlerTests.syncEcho : TestAPI.echo
                let pong = try await client.call(method, Ping(text: "\(i)"), timeout: .seconds(5))
                #expect(pong.text.hasSuffix("\(i)"))
                seen.append(ThreadName.current)
            }
            return seen
        }
        #expect(Set(threads).count == 1)
        #expect(threads.first?.hasPrefix("rpcc") == true)
        // Errors reach such a caller too.
        await #expect(throws: RPCError(.internal, "internal error")) {
            try await withTaskExecutorPreference(client.executor) {
                _ = try await client.call(SyncHandlerTests.syncCrash, Ping(text: ""))
            }
        }
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("64 callers on the executor with deadlines, a cancelled call, and callers left after close")
    func manyCallersAndClose() async throws {
        let (server, bound) = try startServer(SyncHandlerTests.router(), endpoint: inprocEndpoint())
        let client = try RPCClient(configuration: .init(endpoint: bound))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<64 {
                group.addTask(executorPreference: client.executor) {
                    for i in 0..<50 {
                        let pong = try await client.call(TestAPI.echo, Ping(text: "\(t).\(i)"), timeout: .seconds(5))
                        #expect(pong.text.hasSuffix("\(t).\(i)"))
                    }
                }
            }
            try await group.waitForAll()
        }
        // A slow call past its deadline fails on time on the executor as anywhere else.
        let started = ContinuousClock.now
        await #expect(throws: RPCError.self) {
            try await withTaskExecutorPreference(client.executor) {
                _ = try await client.call(TestAPI.echo, Ping(text: "slow", delayMs: 2_000), timeout: .milliseconds(100))
            }
        }
        #expect(ContinuousClock.now - started < .seconds(1))
        // Cancelling a caller on the executor fails its call at once.
        let slow = Task(executorPreference: client.executor) {
            try await client.call(TestAPI.echo, Ping(text: "slow", delayMs: 2_000), timeout: .seconds(5))
        }
        #expect(try await waitUntil { client.core.socket.withLock { $0.pendingCount } == 1 })
        slow.cancel()
        do {
            _ = try await slow.value
            Issue.record("expected cancelled")
        } catch let error as RPCError {
            #expect(error.code == .cancelled)
        }
        // A caller waiting when the client closes is failed and still runs to its end, on the
        // global executor once the I/O thread is gone.
        let waiting = Task(executorPreference: client.executor) { () -> RPCError? in
            do {
                _ = try await client.call(TestAPI.echo, Ping(text: "slow", delayMs: 2_000), timeout: .seconds(5))
                return nil
            } catch let error as RPCError {
                return error
            }
        }
        #expect(try await waitUntil { client.core.socket.withLock { $0.pendingCount } == 1 })
        await client.close()
        let failure = try await waiting.value
        #expect(failure?.code == .unavailable)
        let after = await Task(executorPreference: client.executor) { ThreadName.current }.value
        #expect(!after.hasPrefix("rpcc"))
        server.stop()
        await server.waitUntilStopped()
    }
}
