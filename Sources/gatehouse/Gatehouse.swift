import ArgumentParser
import Foundation
import GatehouseApp
import Logging

@main
struct Gatehouse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "A self-hosted authentication backend.",
        discussion: "Every setting is an environment variable (GATEHOUSE_*), overridden by the flag of the same name; see the configuration table in docs/operators/configuration.md.",
        subcommands: [
            Serve.self, Identity.self, Token.self, GatewayCommand.self, HealthcheckCommand.self, Keys.self, BackupCommand.self,
            RestoreCommand.self, HashBenchmarkCommand.self, Users.self, MailCommand.self, AuditCommand.self, AdminCommand.self, StoreCommand.self,
        ]
    )

    /// Gives up root first when `GATEHOUSE_RUN_AS` says so (the container image: issue 35), then
    /// runs the command as ArgumentParser's own `main` does.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do { try PrivilegeDrop.apply(arguments: arguments) } catch {
            FileHandle.standardError.write(Data("gatehouse: \(error)\n".utf8))
            Foundation.exit(70)
        }
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// Reads the configuration and runs a role; a bad value ends the process with a message naming the key.
func runRole(_ options: [String], _ body: (Config, Logger) async throws -> Void) async throws {
    // Whatever the roles create (databases, keys, mail) is private to the owner.
    umask(0o077)
    do {
        let config = try Config(arguments: options)
        let logger = try GatehouseRoles.bootstrapLogging(config)
        try await body(config, logger)
    } catch let error as ConfigError {
        throw ValidationError(error.message)
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the identity, token and gateway roles in one process (the embedded default).")
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --http-port 8080.") var options: [String] = []
    func run() async throws {
        try await runRole(options) { try await GatehouseRoles.runServe(config: $0, logger: $1) }
    }
}

struct Identity: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the identity service (users, passwords) over tcp.")
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --identity-bind tcp://0.0.0.0:7001.") var options: [String] = []
    func run() async throws {
        try await runRole(options) { try await GatehouseRoles.runIdentity(config: $0, logger: $1) }
    }
}

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the token service (keys, JWTs, sessions) over tcp.")
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --token-bind tcp://0.0.0.0:7011.") var options: [String] = []
    func run() async throws {
        try await runRole(options) { try await GatehouseRoles.runToken(config: $0, logger: $1) }
    }
}

struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "gateway", abstract: "Run the HTTP gateway, calling the services over tcp.")
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --http-port 8080.") var options: [String] = []
    func run() async throws {
        try await runRole(options) { try await GatehouseRoles.runGateway(config: $0, logger: $1) }
    }
}
