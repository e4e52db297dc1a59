// RPC round trip and throughput, each beside the raw libzmq floor measured in the same run.
//
// The two-process benchmarks start `gatehouse-echo-server` (built by the root package:
// `swift build -c release --product gatehouse-echo-server`); set GATEHOUSE_ECHO_SERVER to its
// path, or it is looked up in ../.build/release.
import Benchmark
import Foundation
import GatehouseContracts
import GatehouseRPC
import ZeroMQ
import RPCRouting

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

    /// Starts the echo process if needed and returns the raw tcp dealer, warmed up.
    func rawTCP() throws -> RawDealer {
        try startEchoProcess()
        if let rawTCPDealer { return rawTCPDealer }
        let dealer = try RawDealer(endpoint: rawTCPEndpoint)
        try dealer.roundTrip()
        rawTCPDealer = dealer
        return dealer
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

/// 6,400 calls of `method`, 64 in flight at all times; the callers run on `executor` (nil: the
/// cooperative pool).
func pipelinedCalls(_ client: RPCClient, _ method: RPCMethod<EchoMessage, EchoMessage>, on executor: (any TaskExecutor)? = nil) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<64 {
            group.addTask(executorPreference: executor) { for _ in 0..<100 { blackHole(try await client.call(method, payload)) } }
        }
        try await group.waitForAll()
    }
}

/// Each call's round trip, in nanoseconds: one value per call, so p50 and p99 are per call
/// whichever thread the caller runs on (a sample is 1,000 calls).
let roundTrip = BenchmarkMetric.custom("round trip (ns)", polarity: .prefersSmaller, useScalingFactor: false)
/// The raw libzmq round trip made right after each RPC call, from the same thread: the floor,
/// measured interleaved so the machine's drifting speed affects both alike.
let floorTrip = BenchmarkMetric.custom("floor round trip (ns)", polarity: .prefersSmaller, useScalingFactor: false)

/// Times `body` and records it as `metric`.
@inline(__always)
func timed(_ benchmark: Benchmark, _ metric: BenchmarkMetric, _ body: () throws -> Void) rethrows {
    let start = ContinuousClock.now
    try body()
    benchmark.measurement(metric, nanoseconds(since: start))
}

func nanoseconds(since start: ContinuousClock.Instant) -> Int {
    let elapsed = ContinuousClock.now - start
    return Int(elapsed.components.seconds) * 1_000_000_000 + Int(elapsed.components.attoseconds / 1_000_000_000)
}

/// `count` calls of `method`, one after another, each timed and followed by a timed raw round
/// trip on `floor`.
func roundTrips(
    _ client: RPCClient, _ method: RPCMethod<EchoMessage, EchoMessage>, _ count: Int, _ floor: RawDealer, _ benchmark: Benchmark
) async throws {
    for _ in 0..<count {
        let start = ContinuousClock.now
        blackHole(try await client.call(method, payload))
        benchmark.measurement(roundTrip, nanoseconds(since: start))
        try timed(benchmark, floorTrip) { try floor.roundTrip() }
    }
}

/// The same from one task on the client's executor: the caller sends from the client's I/O
/// thread and is resumed there by the reply (`RPCClient.executor`).
func roundTripsOnExecutor(
    _ client: RPCClient, _ method: RPCMethod<EchoMessage, EchoMessage>, _ count: Int, _ floor: RawDealer, _ benchmark: Benchmark
) async throws {
    // Used by one task at a time: this one, then the caller once `value` returns.
    nonisolated(unsafe) let benchmark = benchmark
    nonisolated(unsafe) let floor = floor
    try await Task(executorPreference: client.executor) {
        try await roundTrips(client, method, count, floor, benchmark)
    }.value
}

let benchmarks: @Sendable () -> Void = {
    // A sample is 1,000 round trips. The RPC benchmarks interleave each call with a raw libzmq
    // round trip (the floor) from the same thread, so their allocation counts include the
    // floor's (7 inproc, 2 tcp: see the floor benchmarks).
    let latency = Benchmark.Configuration(
        metrics: [roundTrip, floorTrip, .mallocCountTotal], timeUnits: .microseconds,
        warmupIterations: 3, scalingFactor: .kilo, maxDuration: .seconds(5), maxIterations: 60)
    let floorOnly = Benchmark.Configuration(
        metrics: [floorTrip, .mallocCountTotal], timeUnits: .microseconds,
        warmupIterations: 3, scalingFactor: .kilo, maxDuration: .seconds(3), maxIterations: 30)

    Benchmark("raw libzmq round trip inproc (floor)", configuration: floorOnly) { benchmark in
        let dealer = Fixture.shared.rawInprocDealer
        for _ in benchmark.scaledIterations { try timed(benchmark, floorTrip) { try dealer.roundTrip() } }
    }

    for (name, method) in [("", echo), (", synchronous handler", echoSync)] {
        for onExecutor in [false, true] {
            Benchmark("RPC round trip inproc\(name)\(onExecutor ? ", caller on the client's executor" : "")", configuration: latency) { benchmark in
                let fixture = Fixture.shared
                let run = onExecutor ? roundTripsOnExecutor : roundTrips
                try await run(fixture.inprocClient, method, benchmark.scaledIterations.count, fixture.rawInprocDealer, benchmark)
            }
        }
    }

    Benchmark("raw libzmq round trip tcp, 2 processes (floor)", configuration: floorOnly) { benchmark in
        let dealer = try Fixture.shared.rawTCP()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { try timed(benchmark, floorTrip) { try dealer.roundTrip() } }
    }

    for (name, method) in [("", echo), (", synchronous handler", echoSync)] {
        for onExecutor in [false, true] {
            Benchmark("RPC round trip tcp, 2 processes\(name)\(onExecutor ? ", caller on the client's executor" : "")", configuration: latency) { benchmark in
                let dealer = try Fixture.shared.rawTCP()
                let client = Fixture.shared.tcpClient!
                _ = try await client.call(method, payload, timeout: .seconds(5))
                benchmark.startMeasurement()
                let run = onExecutor ? roundTripsOnExecutor : roundTrips
                try await run(client, method, benchmark.scaledIterations.count, dealer, benchmark)
            }
        }
    }

    // Throughput: each iteration is 6,400 calls, 64 in flight at all times.
    let pipelined = Benchmark.Configuration(
        metrics: [.wallClock, .throughput], timeUnits: .milliseconds,
        warmupIterations: 2, maxDuration: .seconds(10), maxIterations: 30)

    for tcp in [true, false] {
        for (name, method) in [("", echo), (", synchronous handler", echoSync)] {
            for onExecutor in [false, true] {
                let title = "RPC pipelined, 64 in flight, \(tcp ? "tcp 2 processes" : "inproc")\(name)"
                    + (onExecutor ? ", callers on the client's executor" : "") + " (6400 calls)"
                Benchmark(title, configuration: pipelined) { benchmark in
                    let client: RPCClient
                    if tcp {
                        try Fixture.shared.startEchoProcess()
                        client = Fixture.shared.tcpClient!
                        _ = try await client.call(method, payload, timeout: .seconds(5))
                    } else {
                        client = Fixture.shared.inprocClient
                    }
                    benchmark.startMeasurement()
                    try await pipelinedCalls(client, method, on: onExecutor ? client.executor : nil)
                }
            }
        }
    }

    Benchmark.teardown = {
        Fixture.shared.echoProcess?.terminate()
    }
}

