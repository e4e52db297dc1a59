import ArgumentParser
import Foundation
import GatehouseApp
import Logging

@main
struct Gatehouse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse",
        abstract: "A self-hosted authentication backend.",
        discussion: "Every setting is an environment variable (GATEHOUSE_*), overridden by the flag of the same name; see the README's configuration table.",
        subcommands: [Serve.self, Identity.self]
    )
}

/// Parses the role's settings; a bad value ends the process with a message naming the key.
func loadConfig(_ options: [String]) throws -> Config {
    do { return try Config(arguments: options) } catch let error as ConfigError {
        throw ValidationError(error.message)
    }
}

func runRole(_ options: [String], _ body: (Config, Logger) async throws -> Void) async throws {
    let config = try loadConfig(options)
    do {
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
        print("gatehouse serve: not yet — the gateway lands with issue 5.")
    }
}

struct Identity: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the identity service (users, passwords) over tcp.")
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --identity-bind tcp://0.0.0.0:7001.") var options: [String] = []

    func run() async throws {
        try await runRole(options) { config, logger in try await GatehouseRoles.runIdentity(config: config, logger: logger) }
    }
}
