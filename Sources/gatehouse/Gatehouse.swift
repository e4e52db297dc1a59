import ArgumentParser
import Foundation
import GatehouseApp
import Logging

@main
struct Gatehouse: AsyncParsableCommand {
    /// The top-level commands, in the order `--help` lists them.
    static let commands: [any ParsableCommand.Type] = [
        Serve.self, Identity.self, Token.self, GatewayCommand.self, HealthcheckCommand.self, Keys.self, BackupCommand.self,
        RestoreCommand.self, HashBenchmarkCommand.self, Users.self, MailCommand.self, AuditCommand.self, AdminCommand.self, StoreCommand.self,
        ConfigCommand.self,
    ]

    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "A self-hosted authentication backend.",
        discussion: """
            Every setting is an environment variable (GATEHOUSE_*), overridden by the flag of the same name; \
            `gatehouse config reference` prints them all (docs/operators/configuration.md).

            Every command (`gatehouse COMMAND --help` tells the rest):
            \(commandList())
            """,
        subcommands: commands
    )

    /// One line per command that runs something (`users import`, its abstract's first clause),
    /// walking the command groups, each line short enough not to wrap on an 80-column terminal,
    /// so the root help names every command; `gatehouse COMMAND --help` has the rest.
    static func commandList() -> String {
        var rows: [(String, String)] = []
        func walk(_ command: any ParsableCommand.Type, path: String) {
            let configuration = command.configuration
            let name = configuration.commandName ?? command._commandName
            let full = path.isEmpty ? name : "\(path) \(name)"
            if configuration.subcommands.isEmpty { rows.append((full, configuration.abstract)) }
            for sub in configuration.subcommands { walk(sub, path: full) }
        }
        for command in commands { walk(command, path: "") }
        let width = (rows.map(\.0.count).max() ?? 0) + 2
        return rows.map { name, abstract in
            var text = abstract
            for stop in [" (", ": ", "; "] {
                if let range = text.range(of: stop) { text = String(text[..<range.lowerBound]) }
            }
            if text.hasSuffix(".") { text.removeLast() }
            let room = 79 - 2 - width
            if text.count > room { text = String(text.prefix(room - 1)) + "…" }
            return "  " + name.padding(toLength: width, withPad: " ", startingAt: 0) + text
        }.joined(separator: "\n")
    }

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
