import GatehouseContracts
import GatehouseRPC
import RPCRouting
import Synchronization
import Testing
import ZeroMQ

/// `BalancedRPCClient`: one service run as several instances (issue 24 §2).
@Suite struct BalancedClientTests {
    func client(_ endpoints: [String], timeout: Duration = .seconds(10)) throws -> BalancedRPCClient {
        try BalancedRPCClient(
            endpoints: [endpoints.joined(separator: ",")], configuration: RPCClient.Configuration(endpoint: "", defaultTimeout: timeout))
    }

    @Test func callsAreSpreadOverTheInstancesUp() async throws {
        let (a, endpointA) = try startServer(testRouter(tag: "a:"), endpoint: "tcp://127.0.0.1:0")
        let (b, endpointB) = try startServer(testRouter(tag: "b:"), endpoint: "tcp://127.0.0.1:0")
        let client = try client([endpointA, endpointB])
        #expect(client.endpoints == [endpointA, endpointB])
        #expect(try await waitUntil { client.members.allSatisfy(\.isConnected) })
        var tags: [String: Int] = [:]
        for i in 0..<20 {
            let pong = try await client.call(TestAPI.echo, Ping(text: "\(i)"))
            tags[String(pong.text.prefix(2)), default: 0] += 1
        }
        #expect(tags == ["a:": 10, "b:": 10])
        await client.close()
        a.stop()
        b.stop()
    }

    @Test func anInstanceThatStopsIsRoutedAround() async throws {
        let (a, endpointA) = try startServer(testRouter(tag: "a:"), endpoint: "tcp://127.0.0.1:0")
        let (b, endpointB) = try startServer(testRouter(tag: "b:"), endpoint: "tcp://127.0.0.1:0")
        let client = try client([endpointA, endpointB])
        #expect(try await waitUntil { client.members.allSatisfy(\.isConnected) })
        b.stop()
        await b.waitUntilStopped()
        #expect(try await waitUntil { !client.members[1].isConnected })
        // Not idempotent either: every call goes to the instance still up.
        for i in 0..<10 {
            #expect(try await client.call(TestAPI.echo, Ping(text: "\(i)")).text == "a:\(i)")
        }
        // Both down: a call waits for an instance until its deadline, then fails unavailable.
        a.stop()
        await a.waitUntilStopped()
        #expect(try await waitUntil { !client.members[0].isConnected })
        await #expect(throws: RPCError.self) { try await client.call(TestAPI.echo, Ping(text: "x"), timeout: .milliseconds(200)) }
        // An instance back is used again.
        let again = try await restartServer(testRouter(tag: "a2:"), endpoint: endpointA)
        #expect(try await client.call(TestAPI.echo, Ping(text: "y")).text == "a2:y")
        await client.close()
        again.stop()
    }

    /// A call handed to an instance whose connection then drops fails at once with `unavailable`
    /// (not at its deadline); an idempotent one is tried again on another instance and answered.
    @Test func aLostConnectionFailsItsCallsAtOnceAndIdempotentOnesMove() async throws {
        let hole = try ZMQContext.shared.socket(.router)
        try hole.set([.linger(0)])
        let holeEndpoint = try freeTCPEndpoint()
        try hole.bind(holeEndpoint)
        let (b, endpointB) = try startServer(testRouter(tag: "b:"), endpoint: "tcp://127.0.0.1:0")
        let client = try client([holeEndpoint, endpointB], timeout: .seconds(30))
        #expect(try await waitUntil { client.members.allSatisfy(\.isConnected) })
        // Calls alternate: of four, two reach the instance that never answers.
        let plain = (0..<2).map { i in Task { try await client.call(TestAPI.echo, Ping(text: "p\(i)")) } }
        let retried = (0..<2).map { i in Task { try await client.call(TestAPI.echoIdempotent, Ping(text: "r\(i)")) } }
        var received = 0
        #expect(try await waitUntil {
            while (try? hole.receiveMultipart(dontWait: true)).flatMap({ $0 }) != nil { received += 1 }
            return received >= 2
        })
        let start = ContinuousClock.now
        hole.close()
        var unavailable = 0
        for task in plain {
            do { _ = try await task.value } catch let error as RPCError { if error.code == .unavailable { unavailable += 1 } }
        }
        for task in retried { #expect(try await task.value.text.hasPrefix("b:")) }
        // The non-idempotent call sent to the lost instance failed unavailable, well before its
        // 30 s deadline; the others were answered.
        #expect(unavailable >= 1)
        #expect(ContinuousClock.now - start < .seconds(15))
        await client.close()
        b.stop()
    }
}
