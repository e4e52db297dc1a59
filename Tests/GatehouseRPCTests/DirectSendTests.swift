import Foundation
import GatehouseContracts
@testable import GatehouseRPC
import ProtoCodec
import RPCRouting
import Testing
import ZeroMQ

/// Callers send on the client's DEALER themselves (under the `ClientSocket` lock) while the I/O
/// thread receives on it. These tests would fail if a reply were lost, given to the wrong
/// caller, or a deadline missed because the I/O thread slept through it.
@Suite("RPC client: direct send from callers")
struct DirectSendTests {
    @Test("many tasks calling at once, some cancelled, every reply reaches its own caller", arguments: ["inproc", "tcp"])
    func concurrentCallersUnderCancellation(transport: String) async throws {
        let endpoint = transport == "inproc" ? inprocEndpoint() : "tcp://127.0.0.1:0"
        // A cancelled task's later calls return `cancelled` at once while their requests still
        // reach the server, so far more than 48 can be in flight: lift the bound, or some calls
        // get a (correct, but here unwanted) `overloaded`.
        let (server, bound) = try startServer(testRouter(), endpoint: endpoint) { $0.maxInFlight = 1_000_000 }
        let client = try RPCClient(configuration: .init(endpoint: bound))
        let tasks = 48
        let callsPerTask = 150
        let outcomes = try await withThrowingTaskGroup(of: (ok: Int, cancelled: Int).self) { group in
            for t in 0..<tasks {
                let task = Task {
                    var ok = 0, cancelled = 0
                    for i in 0..<callsPerTask {
                        let text = "\(t).\(i)"
                        do {
                            // Every third task sleeps in the handler now and then, so calls are
                            // still in flight when their task is cancelled.
                            let delay: UInt32 = t % 3 == 0 && i % 10 == 0 ? 20 : 0
                            let pong = try await client.call(TestAPI.echo, Ping(text: text, delayMs: delay), timeout: .seconds(10))
                            #expect(pong.text == text, "a reply went to the wrong caller")
                            ok += 1
                        } catch let error as RPCError where error.code == .cancelled {
                            cancelled += 1
                        }
                    }
                    return (ok, cancelled)
                }
                if t % 4 == 1 {
                    group.addTask {
                        // The scenario: a cancel at a random moment of the task's calls.
                        try await Task.sleep(for: .milliseconds(Int.random(in: 1...30)))
                        task.cancel()
                        return try await task.value
                    }
                } else {
                    group.addTask { try await task.value }
                }
            }
            var all: [(ok: Int, cancelled: Int)] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.count == tasks)
        for outcome in outcomes { #expect(outcome.ok + outcome.cancelled == callsPerTask) }
        // Tasks never cancelled got every reply.
        #expect(outcomes.filter { $0.cancelled == 0 }.count >= tasks - tasks / 4)
        // The client still works, and nothing is left registered.
        #expect(try await client.call(TestAPI.echo, Ping(text: "after")).text == "after")
        #expect(client.core.socket.withLock { $0.pendingCount } == 0)
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("a call with an earlier deadline than every call in flight still fails on time")
    func earlierDeadlineWakesTheIOThread() async throws {
        let (server, bound) = try startServer(testRouter(), endpoint: inprocEndpoint()) { $0.drainTimeout = .milliseconds(10) }
        let client = try RPCClient(configuration: .init(endpoint: bound))
        // A long call makes the I/O thread sleep until its (far) deadline.
        async let long = client.call(TestAPI.echo, Ping(text: "long", delayMs: 1500), timeout: .seconds(10))
        #expect(try await waitUntil { server.inFlight == 1 })
        let start = ContinuousClock.now
        do {
            _ = try await client.call(TestAPI.echo, Ping(text: "short", delayMs: 3000), timeout: .milliseconds(100))
            Issue.record("a call past its deadline succeeded")
        } catch let error as RPCError {
            #expect(error.code == .deadlineExceeded)
        }
        #expect(ContinuousClock.now - start < .milliseconds(1000))
        #expect(try await long.text == "long")
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("a request the socket cannot take at once is queued and sent when the server appears")
    func queuedUntilConnected() async throws {
        let endpoint = try freeTCPEndpoint()
        let client = try RPCClient(configuration: .init(endpoint: endpoint))
        async let reply = client.call(TestAPI.echo, Ping(text: "late"), timeout: .seconds(5))
        #expect(try await waitUntil { client.core.socket.withLock { $0.pendingCount } == 1 })
        let server = try await restartServer(testRouter(), endpoint: endpoint)
        #expect(try await reply.text == "late")
        await client.close()
        server.stop()
        await server.waitUntilStopped()
    }

    @Test("hand-written headers match the Codable encoding and decode the same")
    func headerWireForm() throws {
        let headers = [
            RequestHeader(version: 1, requestID: 1, method: "a.b", timeoutMs: 2000, traceParent: ""),
            RequestHeader(version: 1, requestID: .max, method: "identité.créer", timeoutMs: .max, traceParent: "00-abc-def-01"),
            RequestHeader(version: 0, requestID: 0, method: "", timeoutMs: 0, traceParent: ""),
            RequestHeader(version: 7, requestID: 300, method: String(repeating: "m", count: 300), timeoutMs: 1, traceParent: "t"),
        ]
        for header in headers {
            let codable = try ProtobufEncoder().encode(header)
            let bytes = header.encoded()
            #expect(try ProtobufDecoder().decode(RequestHeader.self, from: bytes) == header)
            #expect(try RequestHeader.decode(codable) == header)
            #expect(try RequestHeader.decode(bytes) == header)
        }
        // Unknown fields fall back to the Codable decoder, which skips them.
        var extended = RequestHeader(version: 1, requestID: 5, method: "x", timeoutMs: 9, traceParent: "").encoded()
        extended += [0x30, 0x01]  // field 6, varint 1
        #expect(try RequestHeader.decode(extended).requestID == 5)
        // Garbage still fails to decode.
        #expect(throws: (any Error).self) { try RequestHeader.decode([0x1A, 0x05, 0x61]) }

        for reply in [ReplyHeader(requestID: 0), ReplyHeader(requestID: 42), ReplyHeader(requestID: .max)] {
            let bytes = try reply.encoded()
            #expect(bytes == (try ProtobufEncoder().encode(reply)))
            #expect(try bytes.withUnsafeBytes { try ReplyHeader.decode($0) } == reply)
        }
        let failed = ReplyHeader(requestID: 9, error: RPCError("email_exists", "taken", details: ["k": "v"]))
        let bytes = try failed.encoded()
        #expect(try bytes.withUnsafeBytes { try ReplyHeader.decode($0) } == failed)
    }
}

extension ReplyHeader {
    init(requestID: UInt64) { self.init(requestID: requestID, error: nil) }
}
