import Foundation
import GatehouseTestSupport
import Testing

/// `gatehouse healthcheck ARGS` with `environment`.
func healthcheck(_ arguments: [String], environment: [String: String]) async throws -> ProcessResult {
    try await runProcess(try gatehouseBinary(), ["healthcheck"] + arguments, environment: environment)
}

/// Polls `gatehouse healthcheck` until it exits 0 (as compose's `service_healthy` does), or
/// fails with its last message after `timeout`.
func waitHealthy(_ arguments: [String], environment: [String: String], timeout: Duration = .seconds(60)) async throws {
    var last = ProcessResult(status: -1, stdout: "", stderr: "never ran")
    do {
        try await waitUntil("healthcheck \(arguments)", timeout: timeout, interval: .milliseconds(200)) {
            last = try await healthcheck(arguments, environment: environment)
            return last.status == 0
        }
    } catch is WaitTimedOut {
        throw StackError("healthcheck \(arguments) did not pass within \(timeout): \(last.stderr)")
    }
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
        let up = try await healthcheck(["--role", "gateway"], environment: stack.environment)
        #expect(up.status == 0 && up.stdout.contains("gateway: up"))

        await stack.kill("token")
        let tokenDown = try await healthcheck([], environment: tokenEnvironment)
        #expect(tokenDown.status == 1)
        #expect(tokenDown.stderr.hasPrefix("token: ") && tokenDown.stderr.filter { $0 == "\n" }.count == 1, "\(tokenDown.stderr)")
        // The gateway's check is liveness only: it stays healthy while a service is down.
        #expect(try await healthcheck(["--role", "gateway"], environment: stack.environment).status == 0)
        #expect(try await healthcheck(["--role", "identity"], environment: stack.environment).status == 0)

        await stack.kill("identity")
        #expect(try await healthcheck(["--role", "identity"], environment: stack.environment).status == 1)
        await stack.kill("gateway")
        let gatewayDown = try await healthcheck(["--role", "gateway"], environment: stack.environment)
        #expect(gatewayDown.status == 1 && gatewayDown.stderr.hasPrefix("gateway: "), "\(gatewayDown.stderr)")
    }

    @Test("a 0.0.0.0 bind is probed on 127.0.0.1; a missing or unknown role exits 1")
    func wildcardBindAndBadRole() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        var environment = stack.environment
        environment["GATEHOUSE_IDENTITY_BIND"] = "tcp://0.0.0.0:\(freeLoopbackPort())"
        environment["GATEHOUSE_ALLOW_PLAINTEXT"] = "true"  // a wildcard bind without CURVE keys needs it
        environment.removeValue(forKey: "GATEHOUSE_ROLE")
        // Not started yet: down.
        #expect(try await healthcheck(["--role", "identity"], environment: environment).status == 1)
        let identity = try launchProcess(try gatehouseBinary(), ["identity"], environment: environment)
        defer {
            identity.terminate()
            identity.waitUntilExit()
        }
        try await waitHealthy(["--role", "identity"], environment: environment)
        let noRole = try await healthcheck([], environment: environment)
        #expect(noRole.status == 1 && noRole.stderr.contains("GATEHOUSE_ROLE"))
        #expect(try await healthcheck(["--role", "database"], environment: environment).status == 1)
        // Flags override the environment, as for the roles.
        #expect(try await healthcheck(["--role", "identity", "--identity-bind", "tcp://0.0.0.0:\(freeLoopbackPort())"], environment: environment).status == 1)
    }
}
