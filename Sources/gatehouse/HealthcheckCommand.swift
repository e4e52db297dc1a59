import ArgumentParser
import Foundation
import GatehouseApp

/// `gatehouse healthcheck [--role gateway|identity|token]`: exit 0 when the role on this host
/// answers, 1 (with one line on stderr) when it does not. The role comes from `--role`, else
/// from `GATEHOUSE_ROLE`, else from PID 1's command line when that is `gatehouse ROLE` (as in a
/// container), so an image can run `gatehouse healthcheck` with no arguments.
struct HealthcheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Exit 0 if the role running on this host answers, 1 if not (for Docker HEALTHCHECK).",
        discussion: """
            gateway, serve: GET /healthz on 127.0.0.1:GATEHOUSE_HTTP_PORT answers 200. identity, token: one RPC call \
            to GATEHOUSE_IDENTITY_BIND / GATEHOUSE_TOKEN_BIND (a 0.0.0.0 or * host means 127.0.0.1) answers \
            within the timeout; an error reply still counts as up.
            """
    )

    @Option(help: "gateway, identity, token or serve (default: GATEHOUSE_ROLE, else the role PID 1 runs if it is gatehouse).")
    var role: String?

    @Option(help: "How long to wait for the answer, in milliseconds.")
    var timeoutMs: Int = 1000

    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --http-port 8080.")
    var options: [String] = []

    func run() async throws {
        // Every failure, including a bad argument, exits 1: Docker reads any other code as
        // "unhealthy" too, but 1 is the one it documents.
        do {
            let pid1 = FileManager.default.contents(atPath: "/proc/1/cmdline").flatMap { Healthcheck.role(commandLine: Array($0)) }
            guard let name = role ?? ProcessInfo.processInfo.environment["GATEHOUSE_ROLE"] ?? pid1?.rawValue, !name.isEmpty else {
                throw Healthcheck.Failure("healthcheck: give --role gateway|identity|token or set GATEHOUSE_ROLE")
            }
            guard let role = Healthcheck.Role(rawValue: name.lowercased()) else {
                throw Healthcheck.Failure("healthcheck: unknown role '\(name)'; expected gateway, identity, token or serve")
            }
            let config = try Config(arguments: options)
            // With CURVE configured the probe uses the role's own key pair (its server always accepts it).
            let message = try await Healthcheck.check(
                role: role, config: config, curveClientKeys: try LinkSecurity.selfProbeKeys(config), timeout: .milliseconds(max(1, timeoutMs)))
            print(message)
        } catch {
            throw failed("\(error)")
        }
    }
}
