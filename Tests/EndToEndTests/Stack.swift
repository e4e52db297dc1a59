import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The built `gatehouse` binary (next to the test bundle in the build folder).
func gatehouseBinary() throws -> URL {
    var dir = Bundle.main.bundleURL
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent("gatehouse")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    let fallback = repositoryRoot.appendingPathComponent(".build/debug/gatehouse")
    guard FileManager.default.isExecutableFile(atPath: fallback.path) else {
        throw StackError("gatehouse binary not found; run `swift build` first")
    }
    return fallback
}

struct StackError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// A free loopback TCP port.
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Gatehouse processes started for a test, with one shared environment.
final class Stack: @unchecked Sendable {
    let environment: [String: String]
    let httpPort: Int
    let dataDir: URL
    var processes: [String: Process] = [:]

    init() {
        dataDir = FileManager.default.temporaryDirectory.appendingPathComponent("gh-e2e-\(UUID().uuidString)")
        httpPort = freePort()
        var env = ProcessInfo.processInfo.environment
        env["GATEHOUSE_DATA_DIR"] = dataDir.path
        env["GATEHOUSE_HTTP_PORT"] = "\(httpPort)"
        env["GATEHOUSE_ARGON2_MEMORY_KIB"] = "1024"
        env["GATEHOUSE_ARGON2_ITERATIONS"] = "1"
        env["GATEHOUSE_LOG_LEVEL"] = "warning"
        let identity = freePort(), identityEvents = freePort(), token = freePort(), tokenEvents = freePort()
        env["GATEHOUSE_IDENTITY_BIND"] = "tcp://127.0.0.1:\(identity)"
        env["GATEHOUSE_IDENTITY_URL"] = "tcp://127.0.0.1:\(identity)"
        env["GATEHOUSE_IDENTITY_EVENTS_BIND"] = "tcp://127.0.0.1:\(identityEvents)"
        env["GATEHOUSE_TOKEN_BIND"] = "tcp://127.0.0.1:\(token)"
        env["GATEHOUSE_TOKEN_URL"] = "tcp://127.0.0.1:\(token)"
        env["GATEHOUSE_TOKEN_EVENTS_BIND"] = "tcp://127.0.0.1:\(tokenEvents)"
        env["GATEHOUSE_TOKEN_EVENTS_URL"] = "tcp://127.0.0.1:\(tokenEvents)"
        environment = env
    }

    var baseURL: String { "http://127.0.0.1:\(httpPort)" }

    /// Starts `gatehouse ROLE`, with `extra` added to the shared environment (per-role keys).
    /// With `captureLog`, its standard error goes to a file read by `log(of:)`.
    func start(_ role: String, environment extra: [String: String] = [:], captureLog: Bool = false) throws {
        let process = Process()
        process.executableURL = try gatehouseBinary()
        process.arguments = [role]
        process.environment = environment.merging(extra) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        if captureLog {
            try FileManager.default.createDirectory(at: dataDir, withIntermediateDirectories: true)
            let file = logFile(of: role)
            guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
                throw StackError("cannot create \(file.path)")
            }
            process.standardError = try FileHandle(forWritingTo: file)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        processes[role] = process
    }

    /// Where `role`'s standard error goes when it is started with `captureLog`.
    func logFile(of role: String) -> URL { dataDir.appendingPathComponent("\(role).stderr") }

    /// What `role`, started with `captureLog`, has written to standard error so far.
    func log(of role: String) -> String {
        (try? String(contentsOf: logFile(of: role), encoding: .utf8)) ?? ""
    }

    /// Waits until `role`'s log has a line containing every one of `texts`; returns that line,
    /// nil after `timeout`.
    func waitForLogLine(of role: String, containing texts: String..., timeout: Duration = .seconds(10)) async throws -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let line = log(of: role).split(separator: "\n").first(where: { line in texts.allSatisfy { line.contains($0) } }) {
                return String(line)
            }
            if ContinuousClock.now > deadline { return nil }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    func kill(_ role: String, signal: Int32 = SIGKILL) {
        guard let process = processes.removeValue(forKey: role) else { return }
        Glibc.kill(process.processIdentifier, signal)
        process.waitUntilExit()
    }

    func stopAll() {
        for role in Array(processes.keys) { kill(role, signal: SIGTERM) }
        try? FileManager.default.removeItem(at: dataDir)
    }

    /// Waits until `/readyz` answers 200.
    func waitReady(timeout: Duration = .seconds(20)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let r = try? await request("GET", "/readyz"), r.status == 200 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw StackError("the stack did not become ready")
    }

    struct Response {
        let status: Int
        let headers: [String: String]
        let body: Data
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    }

    func request(_ method: String, _ path: String, json: Any? = nil, rawBody: Data? = nil, headers: [String: String] = [:], bearer: String? = nil) async throws -> Response {
        var request = URLRequest(url: URL(string: baseURL + path)!)
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
