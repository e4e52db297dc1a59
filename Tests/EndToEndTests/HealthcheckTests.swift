import Foundation
import Testing

/// The outcome of a finished process.
struct ProcessResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs `executable` to completion; output goes through temporary files so a chatty stderr
/// cannot block it.
func runProcess(_ executable: URL, _ arguments: [String], environment: [String: String], stdin: Data? = nil) throws -> ProcessResult {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gh-run-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let out = folder.appendingPathComponent("stdout"), err = folder.appendingPathComponent("stderr")
    FileManager.default.createFile(atPath: out.path, contents: nil)
    FileManager.default.createFile(atPath: err.path, contents: nil)
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.environment = environment
    let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
    process.standardOutput = outHandle
    process.standardError = errHandle
    let input = Pipe()
    process.standardInput = stdin == nil ? FileHandle.nullDevice : input
    try process.run()
    if let stdin {
        input.fileHandleForWriting.write(stdin)
        try input.fileHandleForWriting.close()
    }
    process.waitUntilExit()
    try outHandle.close()
    try errHandle.close()
    return ProcessResult(
        status: process.terminationStatus,
        stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
        stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
}

/// `gatehouse healthcheck ARGS` with `environment`.
func healthcheck(_ arguments: [String], environment: [String: String]) throws -> ProcessResult {
    try runProcess(try gatehouseBinary(), ["healthcheck"] + arguments, environment: environment)
}

/// Polls `gatehouse healthcheck` until it exits 0 (as compose's `service_healthy` does), or
/// fails with its last message after `timeout`.
func waitHealthy(_ arguments: [String], environment: [String: String], timeout: Duration = .seconds(30)) async throws {
    let deadline = ContinuousClock.now + timeout
    var last = ProcessResult(status: -1, stdout: "", stderr: "never ran")
    while ContinuousClock.now < deadline {
        last = try healthcheck(arguments, environment: environment)
        if last.status == 0 { return }
        try await Task.sleep(for: .milliseconds(200))
    }
    throw StackError("healthcheck \(arguments) did not pass within \(timeout): \(last.stderr)")
}

@Suite("gatehouse healthcheck", .serialized)
struct HealthcheckTests {
    @Test("exits 0 for each running role and 1 with one line once that role is stopped")
    func runningAndStopped() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity")
        try stack.start("token")
        try stack.start("gateway")
        // The role from --role, and from GATEHOUSE_ROLE as the Docker HEALTHCHECK gives it.
        try await waitHealthy(["--role", "identity"], environment: stack.environment)
        var tokenEnvironment = stack.environment
        tokenEnvironment["GATEHOUSE_ROLE"] = "token"
        try await waitHealthy([], environment: tokenEnvironment)
        try await waitHealthy(["--role", "gateway"], environment: stack.environment)
        let up = try healthcheck(["--role", "gateway"], environment: stack.environment)
        #expect(up.status == 0 && up.stdout.contains("gateway: up"))

        stack.kill("token")
        let tokenDown = try healthcheck([], environment: tokenEnvironment)
        #expect(tokenDown.status == 1)
        #expect(tokenDown.stderr.hasPrefix("token: ") && tokenDown.stderr.filter { $0 == "\n" }.count == 1, "\(tokenDown.stderr)")
        // The gateway's check is liveness only: it stays healthy while a service is down.
        #expect(try healthcheck(["--role", "gateway"], environment: stack.environment).status == 0)
        #expect(try healthcheck(["--role", "identity"], environment: stack.environment).status == 0)

        stack.kill("identity")
        #expect(try healthcheck(["--role", "identity"], environment: stack.environment).status == 1)
        stack.kill("gateway")
        let gatewayDown = try healthcheck(["--role", "gateway"], environment: stack.environment)
        #expect(gatewayDown.status == 1 && gatewayDown.stderr.hasPrefix("gateway: "), "\(gatewayDown.stderr)")
    }

    @Test("a 0.0.0.0 bind is probed on 127.0.0.1; a missing or unknown role exits 1")
    func wildcardBindAndBadRole() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        var environment = stack.environment
        environment["GATEHOUSE_IDENTITY_BIND"] = "tcp://0.0.0.0:\(freePort())"
        environment["GATEHOUSE_ALLOW_PLAINTEXT"] = "true"  // a wildcard bind without CURVE keys needs it
        environment.removeValue(forKey: "GATEHOUSE_ROLE")
        // Not started yet: down.
        #expect(try healthcheck(["--role", "identity"], environment: environment).status == 1)
        let identity = Process()
        identity.executableURL = try gatehouseBinary()
        identity.arguments = ["identity"]
        identity.environment = environment
        identity.standardOutput = FileHandle.nullDevice
        identity.standardError = FileHandle.nullDevice
        try identity.run()
        defer {
            identity.terminate()
            identity.waitUntilExit()
        }
        try await waitHealthy(["--role", "identity"], environment: environment)
        let noRole = try healthcheck([], environment: environment)
        #expect(noRole.status == 1 && noRole.stderr.contains("GATEHOUSE_ROLE"))
        #expect(try healthcheck(["--role", "database"], environment: environment).status == 1)
        // Flags override the environment, as for the roles.
        #expect(try healthcheck(["--role", "identity", "--identity-bind", "tcp://0.0.0.0:\(freePort())"], environment: environment).status == 1)
    }
}
