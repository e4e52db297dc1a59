// Token service: JWT sign/verify per algorithm through `KeyRing`/`TokenVerifier`, and refresh
// throughput through RPC.
//
// Refresh: a `TokenService` on a real SQLite file served by an `RPCServer` on tcp loopback (or,
// in the `inproc` variants, over `inproc://` as `gatehouse serve` connects its roles); its
// identity dependency is an `RPCClient` to a second `RPCServer` (a fake identity answering
// `identity.claimsForSession`), so every refresh is one RPC in, one SQLite write transaction,
// one RPC out, and an ES256 signature. 64 sessions refresh concurrently, each along its own chain.
import Benchmark
import Foundation
import TokenPorts
import SQLiteStores
import GatehouseContracts
import GatehouseRPC
import Synchronization
import TokenCore
import TokenService
import RPCRouting

let issuer = "https://auth.bench", audience = "app"

func claims(_ now: Date = Date()) -> AccessClaims {
    let iat = Int64(now.timeIntervalSince1970)
    return AccessClaims(
        iss: issuer, aud: audience, sub: "user-1234567890", iat: iat, exp: iat + 900, jti: "f2Xo3y0yJx1nq2bQv7CkRw",
        sid: "9zH0pQ1s2Rk3tU4vW5xY6A", authTime: iat, amr: ["pwd"], email: "ada@example.com", emailVerified: true,
        isAnonymous: false)
}

/// A key ring with one active key of `algorithm`, and a token it signed.
final class SigningFixture: Sendable {
    let keys = KeyRing()
    let verifier: TokenVerifier
    let token: String

    init(_ algorithm: SigningAlgorithm) async throws {
        try await keys.load(active: try SigningKey.generate(algorithm), others: [])
        verifier = TokenVerifier(keys: keys, issuer: issuer, audience: audience)
        token = try keys.sign(claims())
    }
}

/// Per-call refresh latencies by durability, summarised at teardown (the benchmark's own metric is per batch).
let latencies = Mutex<[String: [Duration]]>([:])
/// Wall time of each 6,400-refresh round, by set-up (the interleaved benchmark).
let roundTimes = Mutex<[String: [Duration]]>([:])

/// 6,400 refreshes, 64 chains in flight at all times; returns each call's latency.
func refreshes(_ fixture: RefreshFixture) async throws -> [Duration] {
    try await withThrowingTaskGroup(of: [Duration].self) { group in
        for chain in 0..<RefreshFixture.inFlight {
            group.addTask {
                var measured: [Duration] = []
                measured.reserveCapacity(100)
                var token = fixture.chains.withLock { $0[chain] }
                let clock = ContinuousClock()
                for _ in 0..<100 {
                    let start = clock.now
                    let next = try await fixture.client.call(TokenAPI.refresh, RefreshRequest(refreshToken: token))
                    measured.append(clock.now - start)
                    token = next.refreshToken
                }
                fixture.chains.withLock { $0[chain] = token }
                return measured
            }
        }
        var all: [Duration] = []
        for try await measured in group { all += measured }
        return all
    }
}

final class RefreshFixture: @unchecked Sendable {
    static let inFlight = 64
    let dir: URL
    let identityServer: RPCServer
    let tokenServer: RPCServer
    let client: RPCClient
    let service: TokenService
    /// The current refresh token of each of the 64 chains.
    let chains: Mutex<[String]>

    /// How the services are connected and where the refresh handlers run.
    enum Setup: String, CaseIterable, Sendable {
        /// Over tcp loopback, handlers on the token server's I/O thread (the default, as the
        /// token role runs in its own container).
        case ioThread = "tcp, handlers on the server's I/O thread"
        /// Handlers on Swift's cooperative pool (`handlerExecutor = .globalPool`).
        case globalPool = "tcp, handlers on the cooperative pool"
        /// Over `inproc://`, as `gatehouse serve` connects its roles in one process.
        case inproc = "inproc, handlers on the server's I/O thread"
        /// The refresh-token look-ups read through a memory map (the default until stop 12).
        case readMap = "tcp, look-ups through a memory map"

        func endpoint(_ name: String) -> String {
            self == .inproc ? "inproc://token-bench-\(name)-\(UUID().uuidString)" : "tcp://127.0.0.1:0"
        }
    }

    init(durability: SQLiteTokenStore.Durability, setup: Setup) async throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("token-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var identityRouter = RPCRouter()
        // Synchronous, like the identity service's own claimsForSession (a point read answered on
        // its I/O thread).
        identityRouter.registerSync(ServiceContracts.claimsForSession) { request, _ in
            UserClaims(email: "\(request.userID)@example.com", emailVerified: true)
        }
        identityServer = try RPCServer(router: identityRouter, configuration: .init(endpoints: [setup.endpoint("identity")]))
        let identityEndpoint = try identityServer.start()[0]
        let identity = try RPCClient(configuration: .init(endpoint: identityEndpoint, defaultTimeout: .seconds(10)))
        let config = TokenConfiguration(issuer: issuer, audience: audience)
        let store = try SQLiteTokenStore(
            path: dir.appendingPathComponent("token.sqlite").path, durability: durability,
            pointReadMemoryMap: setup == .readMap ? 256 << 20 : 0)  // RawReadPool.mmapSize
        service = try await TokenService.start(configuration: config, store: store, identity: identity)
        var tokenConfiguration = RPCServer.Configuration(endpoints: [setup.endpoint("token")])
        if setup == .globalPool { tokenConfiguration.handlerExecutor = .globalPool }
        tokenServer = try RPCServer(router: service.router(), configuration: tokenConfiguration)
        let tokenEndpoint = try tokenServer.start()[0]
        client = try RPCClient(configuration: .init(endpoint: tokenEndpoint, defaultTimeout: .seconds(10)))
        var tokens: [String] = []
        for i in 0..<Self.inFlight {
            let issued = try await client.call(TokenAPI.issueSession, IssueSessionRequest(
                userID: "user-\(i)", claims: UserClaims(email: "user-\(i)@example.com", emailVerified: true), amr: ["pwd"],
                authTime: Date(), client: ClientInfo(userAgent: "bench", ip: "127.0.0.1")))
            tokens.append(issued.refreshToken)
        }
        chains = Mutex(tokens)
    }
}

final class Fixtures: @unchecked Sendable {
    static let shared = Fixtures()
    private let lock = NSLock()
    private var signing: [SigningAlgorithm: SigningFixture] = [:]
    private var refreshFixtures: [String: RefreshFixture] = [:]

    func signing(_ algorithm: SigningAlgorithm) async throws -> SigningFixture {
        if let existing = lock.withLock({ signing[algorithm] }) { return existing }
        let made = try await SigningFixture(algorithm)
        lock.withLock { signing[algorithm] = made }
        return made
    }

    func refresh(_ durability: SQLiteTokenStore.Durability, _ setup: RefreshFixture.Setup) async throws -> RefreshFixture {
        let name = "\(durability) \(setup)"
        if let existing = lock.withLock({ refreshFixtures[name] }) { return existing }
        let made = try await RefreshFixture(durability: durability, setup: setup)
        lock.withLock { refreshFixtures[name] = made }
        return made
    }

    var existingRefresh: [RefreshFixture] { lock.withLock { Array(refreshFixtures.values) } }
}

let benchmarks: @Sendable () -> Void = {
    // (c) Sign and verify, µs per operation.
    let perOp = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .microseconds, warmupIterations: 50, maxDuration: .seconds(4), maxIterations: 20_000)

    for algorithm in [SigningAlgorithm.es256, .eddsa, .rs256] {
        Benchmark("sign \(algorithm.rawValue) (KeyRing.sign)", configuration: perOp) { benchmark in
            let fixture = try await Fixtures.shared.signing(algorithm)
            let payload = claims()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(try fixture.keys.sign(payload)) }
        }
        Benchmark("verify \(algorithm.rawValue) (TokenVerifier.verify)", configuration: perOp) { benchmark in
            let fixture = try await Fixtures.shared.signing(algorithm)
            let now = Date()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { blackHole(try await fixture.verifier.verify(fixture.token, now: now)) }
        }
    }

    // (d) Refresh throughput: each iteration is 6,400 refreshes, 64 in flight at all times.
    let throughput = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .milliseconds, warmupIterations: 1, maxDuration: .seconds(20), maxIterations: 20)

    for setup in [RefreshFixture.Setup.ioThread, .inproc] {
        for durability in [SQLiteTokenStore.Durability.processCrash, .powerLoss] {
            let label = (durability == .processCrash ? "process-crash (synchronous=NORMAL)" : "power-loss (synchronous=FULL)")
                + (setup == .inproc ? ", inproc" : "")
            Benchmark("token refresh over RPC, 64 in flight (6400 refreshes), \(label)", configuration: throughput) { benchmark in
                let fixture = try await Fixtures.shared.refresh(durability, setup)
                benchmark.startMeasurement()
                let measured = try await refreshes(fixture)
                latencies.withLock { $0[label, default: []] += measured }
            }
        }
    }

    // The set-ups of `RefreshFixture.Setup`, one round of 6,400 refreshes each per
    // iteration, in turn, so the VM's drifting speed affects them alike. The wall clock is the
    // sum; each set-up's own time per round is printed at the end.
    Benchmark("token refresh A/B: set-ups interleaved, process-crash (6400 refreshes each)", configuration: throughput) { benchmark in
        var fixtures: [(RefreshFixture.Setup, RefreshFixture)] = []
        for setup in [RefreshFixture.Setup.readMap, .ioThread] { fixtures.append((setup, try await Fixtures.shared.refresh(.processCrash, setup))) }
        benchmark.startMeasurement()
        for (setup, fixture) in fixtures {
            let start = ContinuousClock.now
            let measured = try await refreshes(fixture)
            let elapsed = ContinuousClock.now - start
            latencies.withLock { $0["interleaved, " + setup.rawValue, default: []] += measured }
            roundTimes.withLock { $0[setup.rawValue, default: []].append(elapsed) }
        }
    }

    Benchmark.teardown = {
        var summary = ""
        for (label, measured) in latencies.withLock({ $0 }).sorted(by: { $0.key < $1.key }) where !measured.isEmpty {
            let sorted = measured.sorted()
            func pct(_ p: Double) -> Double {
                let d = sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
                return Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
            }
            summary += String(
                format: "token refresh per-call latency, \(label), over %d calls (incl. warm-up): p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                sorted.count, pct(0.50), pct(0.90), pct(0.99), pct(1.0))
        }
        for (setup, rounds) in roundTimes.withLock({ $0 }).sorted(by: { $0.key < $1.key }) where !rounds.isEmpty {
            let ms = rounds.map { Double($0.components.seconds) * 1000 + Double($0.components.attoseconds) / 1e15 }.sorted()
            summary += String(
                format: "token refresh rounds, \(setup): %d rounds, median %.0f ms (%.0f/s), min %.0f ms, max %.0f ms\n",
                ms.count, ms[ms.count / 2], 6400 / ms[ms.count / 2] * 1000, ms[0], ms[ms.count - 1])
        }
        if !summary.isEmpty {
            FileHandle.standardError.write(Data(summary.utf8))
            let path = ProcessInfo.processInfo.environment["GATEHOUSE_BENCH_LATENCY_FILE"] ?? "/tmp/gatehouse-token-refresh-latency.txt"
            // Appended: package-benchmark runs each benchmark in a process of its own, and each
            // one's teardown writes its own lines.
            if let handle = FileHandle(forWritingAtPath: path) ?? (FileManager.default.createFile(atPath: path, contents: nil) ? FileHandle(forWritingAtPath: path) : nil) {
                handle.seekToEndOfFile()
                handle.write(Data(summary.utf8))
                try? handle.close()
            }
        }
        for fixture in Fixtures.shared.existingRefresh {
            fixture.tokenServer.stop()
            fixture.identityServer.stop()
            try? FileManager.default.removeItem(at: fixture.dir)
        }
    }
}
