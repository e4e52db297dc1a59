import Foundation
import GatehouseSupport
import GatehouseTestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

struct StackError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// The built `gatehouse` binary.
func gatehouseBinary() throws -> URL { try BuiltProducts.executable(named: "gatehouse") }

/// Gatehouse processes started for a test, with one shared environment.
final class Stack: @unchecked Sendable {
    let environment: [String: String]
    let httpPort: Int
    /// The identity role's admin listener port.
    let adminPort: Int
    /// An admin API key with every scope, made by `adminKey()` the first time it is asked for.
    private var madeAdminKey: String?
    let dataDir: URL
    var processes: [String: ChildProcess] = [:]
    /// The clock every process of the stack reads (`GATEHOUSE_TEST_CLOCK_FILE`): the system time
    /// plus an offset the test moves with `advanceClock(by:)`.
    let clock: OffsetClockFile

    init() {
        // Unique per stack: stacks of suites running in parallel share no folder and no port.
        dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("gh-e2e-\(UUID().uuidString)")
        httpPort = freeLoopbackPort()
        var env = ProcessInfo.processInfo.environment
        env["GATEHOUSE_DATA_DIR"] = dataDir.path
        env["GATEHOUSE_HTTP_PORT"] = "\(httpPort)"
        env["GATEHOUSE_ARGON2_MEMORY_KIB"] = "1024"
        env["GATEHOUSE_ARGON2_ITERATIONS"] = "1"
        env["GATEHOUSE_LOG_LEVEL"] = "warning"
        let clockPath = FileManager.default.temporaryDirectory.appendingPathComponent("gh-clock-\(UUID().uuidString)").path
        clock = try! OffsetClockFile(path: clockPath)
        env["GATEHOUSE_TEST_CLOCK_FILE"] = clockPath
        // Loopback tcp between the roles, without CURVE keys (tests that use keys set them per role).
        env["GATEHOUSE_ALLOW_PLAINTEXT"] = "true"
        // Every test talks from 127.0.0.1: the per-address limits stay on but out of reach
        // (tests of the limits set their own).
        for key in ["SIGN_IN", "SIGN_UP", "ANONYMOUS_SIGN_UP", "PASSWORD_STRENGTH", "REFRESH", "PASSWORD_RESET"] { env["GATEHOUSE_RATE_LIMIT_\(key)"] = "100000/s" }
        let identity = freeLoopbackPort(), identityEvents = freeLoopbackPort(), token = freeLoopbackPort(), tokenEvents = freeLoopbackPort()
        env["GATEHOUSE_IDENTITY_BIND"] = "tcp://127.0.0.1:\(identity)"
        env["GATEHOUSE_IDENTITY_URL"] = "tcp://127.0.0.1:\(identity)"
        env["GATEHOUSE_IDENTITY_EVENTS_BIND"] = "tcp://127.0.0.1:\(identityEvents)"
        env["GATEHOUSE_IDENTITY_EVENTS_URL"] = "tcp://127.0.0.1:\(identityEvents)"
        env["GATEHOUSE_TOKEN_BIND"] = "tcp://127.0.0.1:\(token)"
        env["GATEHOUSE_TOKEN_URL"] = "tcp://127.0.0.1:\(token)"
        env["GATEHOUSE_TOKEN_EVENTS_BIND"] = "tcp://127.0.0.1:\(tokenEvents)"
        env["GATEHOUSE_TOKEN_EVENTS_URL"] = "tcp://127.0.0.1:\(tokenEvents)"
        // The identity role's admin listener, on a port of its own per stack.
        adminPort = freeLoopbackPort()
        env["GATEHOUSE_ADMIN_PORT"] = "\(adminPort)"
        env["GATEHOUSE_ADMIN_URL"] = "http://127.0.0.1:\(adminPort)"
        environment = env
    }

    var baseURL: String { "http://127.0.0.1:\(httpPort)" }

    /// An admin API key with every scope (`gatehouse admin keys create`, once per stack).
    func adminKey() async throws -> String {
        if let madeAdminKey { return madeAdminKey }
        let made = try await runProcess(try gatehouseBinary(), ["admin", "keys", "create", "--name", "tests", "--scope", "all"], environment: environment)
        guard made.status == 0, let key = made.stdout.split(separator: "\n").first.map(String.init), key.hasPrefix("gha_") else {
            throw StackError("gatehouse admin keys create failed: \(made.stderr)")
        }
        madeAdminKey = key
        return key
    }

    /// A CURVE key set from `gatehouse keys generate` in the stack's folder, as each role's
    /// environment (`identity`, `token`, `gateway`).
    func curveKeyEnvironments() async throws -> [String: [String: String]] {
        let keys = dataDir.appendingPathComponent("keys")
        let generate = try await runProcess(try gatehouseBinary(), ["keys", "generate", "--out", keys.path])
        guard generate.status == 0 else { throw StackError("gatehouse keys generate failed: \(generate.stderr)") }
        let key = { (name: String) in keys.appendingPathComponent(name).path }
        return [
            "identity": [
                "GATEHOUSE_CURVE_SECRET_KEY_FILE": key("identity.key"), "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE": key("identity.allow"),
                "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE": key("token.pub"),
            ],
            "token": [
                "GATEHOUSE_CURVE_SECRET_KEY_FILE": key("token.key"), "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE": key("token.allow"),
                "GATEHOUSE_IDENTITY_PUBLIC_KEY_FILE": key("identity.pub"), "GATEHOUSE_KEY_ENCRYPTION_KEY_FILE": key("key-encryption.key"),
            ],
            "gateway": [
                "GATEHOUSE_CURVE_SECRET_KEY_FILE": key("gateway.key"),
                "GATEHOUSE_IDENTITY_PUBLIC_KEY_FILE": key("identity.pub"), "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE": key("token.pub"),
            ],
        ]
    }

    /// Moves the clock of every process of the stack forward by `duration` (no sleeping).
    func advanceClock(by duration: Duration) { clock.advance(by: duration) }

    /// Starts `gatehouse ROLE`, with `extra` added to the shared environment (per-role keys),
    /// known as `name` (default: the role) to `kill` and `log(of:)`.
    /// With `captureLog`, its standard output and error go to a file read by `log(of:)`.
    func start(_ role: String, name: String? = nil, environment extra: [String: String] = [:], captureLog: Bool = false) throws {
        if captureLog { try FileManager.default.createDirectory(at: dataDir, withIntermediateDirectories: true) }
        processes[name ?? role] = try launchProcess(
            try gatehouseBinary(), [role], environment: environment.merging(extra) { _, new in new },
            log: captureLog ? logFile(of: name ?? role) : nil)
    }

    /// Starts `gatehouse identity`, `token` and `gateway` as three processes and waits until
    /// the gateway is ready.
    func startThreeRoles() async throws {
        for role in ["identity", "token", "gateway"] { try start(role) }
        try await waitReady()
    }

    /// The file `role`'s output goes to when started with `captureLog`.
    func logFile(of role: String) -> URL { dataDir.appendingPathComponent("\(role).stderr") }

    /// What `role`, started with `captureLog`, has written so far.
    func log(of role: String) -> String {
        (try? String(contentsOf: logFile(of: role), encoding: .utf8)) ?? ""
    }

    /// Waits until `role`'s log has a line containing every one of `texts`; returns that line,
    /// nil after `timeout`.
    func waitForLogLine(of role: String, containing texts: String..., timeout: Duration = .seconds(10)) async throws -> String? {
        func line() -> String? {
            log(of: role).split(separator: "\n").first { line in texts.allSatisfy { line.contains($0) } }.map(String.init)
        }
        do {
            try await waitUntil("a line of \(role)'s log with \(texts)", timeout: timeout, interval: .milliseconds(50)) { line() != nil }
        } catch is WaitTimedOut {
            return nil
        }
        return line()
    }

    /// Sends `signal` to ROLE's process and waits until it ended.
    func kill(_ role: String, signal: Int32 = SIGKILL) async {
        guard let process = processes.removeValue(forKey: role) else { return }
        await process.stop(signal: signal)
    }

    /// Stops every process (SIGTERM, waiting for each) and deletes the data folder. Blocks: it
    /// runs in `defer`, once the test is done.
    func stopAll() {
        for (_, process) in processes {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        processes = [:]
        try? FileManager.default.removeItem(at: dataDir)
        try? FileManager.default.removeItem(atPath: clock.path)
    }

    /// Waits until `/readyz` answers 200 (on the gateway at `port`, default `httpPort`).
    func waitReady(port: Int? = nil, timeout: Duration = .seconds(60)) async throws {
        try await waitUntil("/readyz answering 200 on port \(port ?? httpPort)", timeout: timeout, interval: .milliseconds(100)) {
            (try? await request("GET", "/readyz", port: port))?.status == 200
        }
    }

    struct Response {
        let status: Int
        let headers: [String: String]
        let body: Data
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    }

    /// One HTTP request to the gateway at `port` (default `httpPort`).
    func request(
        _ method: String, _ path: String, json: Any? = nil, rawBody: Data? = nil, headers: [String: String] = [:], bearer: String? = nil,
        port: Int? = nil
    ) async throws -> Response {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port ?? httpPort)" + path)!)
        request.httpMethod = method
        request.timeoutInterval = 10
        if let json {
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        if let rawBody { request.httpBody = rawBody }
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        var h: [String: String] = [:]
        for (k, v) in http.allHeaderFields { h[String(describing: k).lowercased()] = String(describing: v) }
        return Response(status: http.statusCode, headers: h, body: data)
    }
}
