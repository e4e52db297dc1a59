// RPC round trip and throughput, each beside the raw libzmq floor measured in the same run.
//
// The two-process benchmarks start `gatehouse-echo-server` (built by the root package:
// `swift build -c release --product gatehouse-echo-server`); set GATEHOUSE_ECHO_SERVER to its
// path, or it is looked up in ../.build/release.
import Benchmark
import Foundation
import GatehouseProtocol
import GatehouseRPC
import ZeroMQ

struct EchoMessage: Codable, Sendable {
    var text: String
    enum CodingKeys: Int, CodingKey { case text = 1 }
}

let echo = RPCMethod<EchoMessage, EchoMessage>(name: "bench.echo")
/// The same echo registered with `registerSync`: answered on the server's I/O thread without a task.
let echoSync = RPCMethod<EchoMessage, EchoMessage>(name: "bench.echoSync")
/// About 100 bytes on the wire, like the floors in MEASUREMENTS.md.
let payload = EchoMessage(text: String(repeating: "x", count: 96))
let rawPayload = [UInt8](repeating: 0x78, count: 100)

/// Everything the benchmarks share, made once.
final class Fixture: @unchecked Sendable {
    static let shared = Fixture()

    let inprocServer: RPCServer
    let inprocClient: RPCClient
    let rawInprocEndpoint = "inproc://bench-raw"
    var echoProcess: Process?
    var tcpClient: RPCClient?
    var rawTCPEndpoint = ""
    /// One raw dealer per floor, reused: the closure runs once per sample, and a socket made
    /// (and closed) each time exhausted file descriptors under load (libzmq reaps them lazily).
    lazy var rawInprocDealer = try! RawDealer(endpoint: rawInprocEndpoint)
    var rawTCPDealer: RawDealer?
    let stdinPipe = Pipe()

    private init() {
        var router = RPCRouter()
        router.register(echo) { message, _ in message }
        router.registerSync(echoSync) { message, _ in message }
        inprocServer = try! RPCServer(router: router, configuration: .init(endpoints: ["inproc://bench-rpc"]))
        try! inprocServer.start()
        inprocClient = try! RPCClient(configuration: .init(endpoint: "inproc://bench-rpc"))
        // The raw in-process echo: a ROUTER on its own thread.
        let ready = DispatchSemaphore(value: 0)
        let endpoint = rawInprocEndpoint
        Thread {
            let router = try! ZMQContext.shared.socket(.router)
            try! router.bind(endpoint)
            ready.signal()
            while let frames = try? router.receiveMultipart() { _ = try? router.send(multipart: frames) }
        }.start()
        ready.wait()
    }

    /// Starts the echo server process once and connects to it.
    func startEchoProcess() throws {
        guard echoProcess == nil else { return }
        let path = ProcessInfo.processInfo.environment["GATEHOUSE_ECHO_SERVER"]
            ?? FileManager.default.currentDirectoryPath + "/../.build/release/gatehouse-echo-server"
        let rpcPort = Int.random(in: 20_000..<40_000)
        let rpcEndpoint = "tcp://127.0.0.1:\(rpcPort)"
        rawTCPEndpoint = "tcp://127.0.0.1:\(rpcPort + 1)"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = [rpcEndpoint, rawTCPEndpoint]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        // The server exits when this pipe closes, i.e. when this benchmark process ends.
        process.standardInput = stdinPipe
        try process.run()
        _ = out.fileHandleForReading.availableData  // "ready"
        echoProcess = process
        tcpClient = try RPCClient(configuration: .init(endpoint: rpcEndpoint))
    }
}

/// One raw DEALER round trip per call (the floor).
final class RawDealer {
    let socket: Socket
    init(endpoint: String) throws {
        socket = try ZMQContext.shared.socket(.dealer)
        try socket.connect(endpoint)
    }
    func roundTrip() throws {
        try socket.send(rawPayload)
        _ = try socket.receive()
    }
}

/// 6,400 calls of `method`, 64 in flight at all times.
func pipelined(_ client: RPCClient, _ method: RPCMethod<EchoMessage, EchoMessage>) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<64 {
            group.addTask { for _ in 0..<100 { blackHole(try await client.call(method, payload)) } }
        }
        try await group.waitForAll()
    }
}

let benchmarks: @Sendable () -> Void = {
    let latency = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal], timeUnits: .microseconds,
        warmupIterations: 1000, maxDuration: .seconds(5), maxIterations: 50_000)

    Benchmark("raw libzmq round trip inproc (floor)", configuration: latency) { benchmark in
        let dealer = Fixture.shared.rawInprocDealer
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { try dealer.roundTrip() }
    }

    Benchmark("RPC round trip inproc", configuration: latency) { benchmark in
        let client = Fixture.shared.inprocClient
        for _ in benchmark.scaledIterations { blackHole(try await client.call(echo, payload)) }
    }

    Benchmark("RPC round trip inproc, synchronous handler", configuration: latency) { benchmark in
        let client = Fixture.shared.inprocClient
        for _ in benchmark.scaledIterations { blackHole(try await client.call(echoSync, payload)) }
    }

    Benchmark("raw libzmq round trip tcp, 2 processes (floor)", configuration: latency) { benchmark in
        try Fixture.shared.startEchoProcess()
        if Fixture.shared.rawTCPDealer == nil { Fixture.shared.rawTCPDealer = try RawDealer(endpoint: Fixture.shared.rawTCPEndpoint) }
        let dealer = Fixture.shared.rawTCPDealer!
        try dealer.roundTrip()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { try dealer.roundTrip() }
    }

    Benchmark("RPC round trip tcp, 2 processes", configuration: latency) { benchmark in
        try Fixture.shared.startEchoProcess()
        let client = Fixture.shared.tcpClient!
        _ = try await client.call(echo, payload, timeout: .seconds(5))
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try await client.call(echo, payload)) }
    }

    Benchmark("RPC round trip tcp, 2 processes, synchronous handler", configuration: latency) { benchmark in
        try Fixture.shared.startEchoProcess()
        let client = Fixture.shared.tcpClient!
        _ = try await client.call(echoSync, payload, timeout: .seconds(5))
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { blackHole(try await client.call(echoSync, payload)) }
    }

    // Throughput: each iteration is 6,400 calls, 64 in flight at all times.
    let pipelined = Benchmark.Configuration(
        metrics: [.wallClock, .throughput], timeUnits: .milliseconds,
        warmupIterations: 2, maxDuration: .seconds(10), maxIterations: 30)

    Benchmark("RPC pipelined, 64 in flight, tcp 2 processes (6400 calls)", configuration: pipelined) { benchmark in
        try Fixture.shared.startEchoProcess()
        let client = Fixture.shared.tcpClient!
        _ = try await client.call(echo, payload, timeout: .seconds(5))
        benchmark.startMeasurement()
        try await pipelined(client, echo)
    }

    Benchmark("RPC pipelined, 64 in flight, tcp 2 processes, synchronous handler (6400 calls)", configuration: pipelined) { benchmark in
        try Fixture.shared.startEchoProcess()
        let client = Fixture.shared.tcpClient!
        _ = try await client.call(echoSync, payload, timeout: .seconds(5))
        benchmark.startMeasurement()
        try await pipelined(client, echoSync)
    }

    Benchmark("RPC pipelined, 64 in flight, inproc, synchronous handler (6400 calls)", configuration: pipelined) { benchmark in
        let client = Fixture.shared.inprocClient
        try await pipelined(client, echoSync)
    }

    Benchmark("RPC pipelined, 64 in flight, inproc (6400 calls)", configuration: pipelined) { benchmark in
        let client = Fixture.shared.inprocClient
        try await pipelined(client, echo)
    }

    Benchmark.teardown = {
        Fixture.shared.echoProcess?.terminate()
    }
}
