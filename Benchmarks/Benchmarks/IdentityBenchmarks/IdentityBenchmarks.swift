// Identity service: the cost of a password hash against a whole sign-in over RPC, and the
// look-up by normalized email on a file with 10,000 users.
//
// Sign-in runs `IdentityHandlers` (real `SQLiteUserStore`, `HashPool` with one worker per core,
// Argon2id at the OWASP defaults) behind an `RPCServer` on tcp loopback, called through an
// `RPCClient`; the token service is a fake answering `token.issueSession` in process.
import Benchmark
import Foundation
import GatehouseProtocol
import GatehouseRPC
import IdentityCore
import IdentityService

let userCount = 10_000
let password = "correct horse battery staple"

/// Everything the benchmarks share, made once.
final class Fixture: @unchecked Sendable {
    static let shared = try! Fixture()

    let dir: URL
    let store: SQLiteUserStore
    let pool: HashPool
    let server: RPCServer
    let client: RPCClient
    let emails: [String]

    private init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("identity-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        store = try SQLiteUserStore(path: dir.appendingPathComponent("users.sqlite").path)
        try store.migrateSync()
        // 10,000 users with a cheap placeholder hash, one transaction each (as sign-up does).
        var emails: [String] = []
        for i in 0..<userCount {
            let email = try EmailAddress("user\(i)@example.com")
            emails.append(email.normalized)
            try store.insertSync(UserRecord(
                id: .random(), email: email, passwordHash: "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA", createdAt: Date()))
        }
        self.emails = emails
        // The one user that signs in, with a real OWASP-parameter hash.
        let hash = try PasswordHashing.argon2idHash(Array(password.utf8), parameters: .owasp)
        try store.insertSync(UserRecord(id: .random(), email: try EmailAddress("bench@example.com"), passwordHash: hash, createdAt: Date()))

        pool = HashPool(workers: ProcessInfo.processInfo.activeProcessorCount, queueLimit: 64)
        var tokenRouter = RPCRouter()
        tokenRouter.register(ServiceContracts.issueSession) { request, _ in
            SessionTokens(accessToken: "access-\(request.userID)", refreshToken: "refresh", expiresIn: 900, sessionID: "sid")
        }
        let handlers = IdentityHandlers(
            store: store, hasher: PasswordHasher(parameters: .owasp, pool: pool), policy: PasswordPolicy(),
            tokens: LocalCaller(router: tokenRouter))
        server = try RPCServer(router: handlers.router(), configuration: .init(endpoints: ["tcp://127.0.0.1:0"]))
        let endpoint = try server.start()[0]
        client = try RPCClient(configuration: .init(endpoint: endpoint, defaultTimeout: .seconds(30)))
    }
}

let benchmarks: @Sendable () -> Void = {
    // (a) Hashing against signing in.
    let slow = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .milliseconds, warmupIterations: 2, maxDuration: .seconds(10), maxIterations: 200)

    Benchmark("Argon2id hash, OWASP m=19456 t=2 p=1 (bare, 1 thread)", configuration: slow) { benchmark in
        let bytes = Array(password.utf8)
        for _ in benchmark.scaledIterations { blackHole(try PasswordHashing.argon2idHash(bytes, parameters: .owasp)) }
    }

    // Each iteration: 2 concurrent callers × 10 sign-ins each = 20 sign-ins over RPC.
    Benchmark("sign-in over RPC, 2 concurrent callers (20 sign-ins)", configuration: slow) { benchmark in
        let client = Fixture.shared.client
        _ = try await client.call(IdentityAPI.signIn, SignInRequest(email: "bench@example.com", password: password))
        benchmark.startMeasurement()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    for _ in 0..<10 {
                        blackHole(try await client.call(IdentityAPI.signIn, SignInRequest(email: "bench@example.com", password: password)))
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    // (b) Point look-up by normalized email among 10,000 users; 1,000 look-ups per iteration.
    let lookups = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .milliseconds, warmupIterations: 3, maxDuration: .seconds(10), maxIterations: 200)

    Benchmark("look-up by normalized email, 10,000 users, 1 caller (1000 look-ups)", configuration: lookups) { benchmark in
        let fixture = Fixture.shared
        let probes = (0..<1000).map { _ in fixture.emails.randomElement()! }
        benchmark.startMeasurement()
        for email in probes { blackHole(try await fixture.store.user(normalizedEmail: email)) }
    }

    Benchmark("look-up by normalized email, 10,000 users, 4 callers (1000 look-ups)", configuration: lookups) { benchmark in
        let fixture = Fixture.shared
        let probes = (0..<4).map { _ in (0..<250).map { _ in fixture.emails.randomElement()! } }
        benchmark.startMeasurement()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for batch in probes {
                group.addTask { for email in batch { blackHole(try await fixture.store.user(normalizedEmail: email)) } }
            }
            try await group.waitForAll()
        }
    }

    Benchmark.teardown = {
        Fixture.shared.server.stop()
        try? FileManager.default.removeItem(at: Fixture.shared.dir)
    }
}
