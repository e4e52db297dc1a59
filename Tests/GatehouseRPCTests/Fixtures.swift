import GatehouseContracts
import GatehouseRPC
import class GatehouseTestSupport.Gate
import func GatehouseTestSupport.freeLoopbackPort
import RPCRouting
import Synchronization
import Logging
import ZeroMQ
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct Ping: Codable, Sendable, Equatable {
    var text: String
    var delayMs: UInt32 = 0
    enum CodingKeys: Int, CodingKey {
        case text = 1
        case delayMs = 2
    }
}

struct Pong: Codable, Sendable, Equatable {
    var text: String
    enum CodingKeys: Int, CodingKey { case text = 1 }
}

enum TestAPI {
    static let echo = RPCMethod<Ping, Pong>(name: "test.echo")
    static let echoIdempotent = RPCMethod<Ping, Pong>(name: "test.echoIdempotent", idempotent: true)
    static let fail = RPCMethod<Ping, Pong>(name: "test.fail")
    static let crash = RPCMethod<Ping, Pong>(name: "test.crash")
    static let missing = RPCMethod<Ping, Pong>(name: "test.missing")
}

struct SomeInternalError: Error {}

/// A router with echo (optionally slow), a failing method and one throwing a non-RPC error.
func testRouter(tag: String = "") -> RPCRouter {
    var router = RPCRouter()
    let echo: @Sendable (Ping, RPCContext) async throws -> Pong = { ping, _ in
        // A slow handler when asked (the scenario of deadline, cancellation and drain tests).
        if ping.delayMs > 0 { try await Task.sleep(for: .milliseconds(ping.delayMs)) }
        return Pong(text: tag + ping.text)
    }
    router.register(TestAPI.echo, echo)
    router.register(TestAPI.echoIdempotent, echo)
    router.register(TestAPI.fail) { ping, _ in
        throw RPCError("email_exists", "that address is taken", details: ["field": ping.text])
    }
    router.register(TestAPI.crash) { _, _ in throw SomeInternalError() }
    return router
}

/// A fresh, unique inproc endpoint name.
func inprocEndpoint(_ name: String = #function) -> String {
    "inproc://test-\(name)-\(UInt64.random(in: 0...UInt64.max))"
}

/// Starts a server on `endpoint` and returns it with its bound endpoint.
func startServer(_ router: RPCRouter, endpoint: String, configure: (inout RPCServer.Configuration) -> Void = { _ in }) throws -> (RPCServer, String) {
    var configuration = RPCServer.Configuration(endpoints: [endpoint])
    configure(&configuration)
    let server = try RPCServer(router: router, configuration: configuration)
    let bound = try server.start()
    return (server, bound[0])
}

/// A free TCP endpoint on loopback (`freeLoopbackPort` never hands out a port twice).
func freeTCPEndpoint() throws -> String {
    "tcp://127.0.0.1:\(freeLoopbackPort())"
}

/// Starts a server on a fixed endpoint, retrying while the previous owner's listening socket
/// is still being closed by libzmq's I/O thread (closing is asynchronous).
func restartServer(_ router: RPCRouter, endpoint: String, configure: (inout RPCServer.Configuration) -> Void = { _ in }) async throws -> RPCServer {
    for _ in 0..<100 {
        do { return try startServer(router, endpoint: endpoint, configure: configure).0 } catch let error as ZMQError where error.code == EADDRINUSE {
            try await Task.sleep(for: .milliseconds(20))
        }
    }
    return try startServer(router, endpoint: endpoint, configure: configure).0
}

/// Polls `condition` every 5 ms until it holds or `timeout` passes; returns whether it held.
func waitUntil(timeout: Duration = .seconds(10), _ condition: () -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try await Task.sleep(for: .milliseconds(5))
    }
    return true
}

