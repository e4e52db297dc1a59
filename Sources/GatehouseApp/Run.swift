import Foundation
import GatehouseSupport
import GatehouseRPC
import Logging
import ServiceLifecycle
import UnixSignals

/// Keeps a process alive as a `Service` until graceful shutdown, then runs `onShutdown`
/// (closing sockets that are not services themselves).
struct ShutdownHook: Service {
    let onShutdown: @Sendable () async -> Void

    func run() async throws {
        try? await gracefulShutdown()
        await onShutdown()
    }
}

/// Entry points of the `gatehouse` roles. Each reads the configuration table, starts its parts
/// and runs them in a `ServiceGroup` that shuts down gracefully on SIGTERM/SIGINT.
public enum GatehouseRoles {
    /// Sets the process-wide log level from `GATEHOUSE_LOG_LEVEL` (call once, first).
    public static func bootstrapLogging(_ config: Config) throws -> Logger {
        let text = try config.required(ConfigTable.logLevel)
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw ConfigError(message: "GATEHOUSE_LOG_LEVEL (--log-level) must be one of trace, debug, info, notice, warning, error, critical; not '\(text)'")
        }
        LoggingSystem.bootstrap { label in StandardErrorLogHandler(label: label, level: level, metadataProvider: .traceID) }
        return Logger(label: "gatehouse")
    }

    /// The wall clock of a role: the system's, or with `GATEHOUSE_TEST_CLOCK_FILE` the system's
    /// plus the offset in that file (end-to-end tests; a warning says so).
    public static func clock(_ config: Config, logger: Logger) throws -> WallClock {
        guard let path = config.string(ConfigTable.testClockFile), !path.isEmpty else { return .system }
        let file: OffsetClockFile
        do { file = try OffsetClockFile(path: path) } catch {
            throw ConfigError(message: "GATEHOUSE_TEST_CLOCK_FILE (--test-clock-file): \(error)")
        }
        logger.warning("TEST CLOCK: time is the system's plus the offset in \(path); never use this in production")
        return file.clock
    }

    /// `gatehouse identity`: the identity service alone, over tcp.
    public static func runIdentity(config: Config, logger: Logger) async throws {
        let role = try await IdentityRole.start(IdentityRoleSettings(config: config), clock: clock(config, logger: logger), logger: logger)
        // The group shuts down in reverse: the hook, first in the list, runs last, once the
        // server has drained (its handlers still use the token client, the publisher and the database).
        try await runGroup(
            [ShutdownHook { await role.close() }, role.server, role.anonymousSweeper,
             role.outboxDelivery, role.changeLog] + [role.adminAPI, role.appleRevocations].compactMap { $0 }, logger: logger)
    }

    /// `gatehouse token`: the token service alone, over tcp.
    public static func runToken(config: Config, logger: Logger) async throws {
        let role = try await TokenRole.start(TokenRoleSettings(config: config), clock: clock(config, logger: logger), logger: logger)
        // The hook first: it closes the database pool after the server has drained.
        try await runGroup([ShutdownHook { await role.close() }] + role.services, logger: logger)
    }

    /// `gatehouse gateway`: the HTTP gateway alone, calling the services over tcp.
    public static func runGateway(config: Config, logger: Logger) async throws {
        let role = try GatewayRole.start(GatewayRoleSettings(config: config), clock: clock(config, logger: logger), logger: logger)
        try await runGroup([ShutdownHook { await role.identity.close(); await role.tokens.close() }, role.application], logger: logger)
    }

    /// `gatehouse serve`: all three roles in one process over `inproc://` sockets.
    public static func runServe(config: Config, logger: Logger) async throws {
        let clock = try clock(config, logger: logger)
        let identity = try await IdentityRole.start(
            IdentityRoleSettings(config: config, rpcBind: "inproc://identity", eventsBind: "inproc://identity-events", tokenURL: "inproc://token"),
            clock: clock, logger: logger)
        let token = try await TokenRole.start(
            TokenRoleSettings(config: config, rpcBind: "inproc://token", eventsBind: "inproc://token-events", identityURL: "inproc://identity"),
            clock: clock, logger: logger)
        let gateway = try GatewayRole.start(
            GatewayRoleSettings(config: config, identityURL: "inproc://identity", tokenURL: "inproc://token", tokenEventsURL: "inproc://token-events",
                identityEventsURL: "inproc://identity-events"),
            clock: clock, logger: logger)
        let hook = ShutdownHook {
            await gateway.identity.close()
            await gateway.tokens.close()
            await identity.close()
            await token.close()
        }
        FileHandle.standardError.write(Data(try ServeBanner(config: config).text.utf8))
        // Shutdown runs in reverse: the gateway stops taking requests first, then the services
        // drain, and the hook (first in the list) closes the clients and the database last.
        try await runGroup(
            [
                hook, identity.server, token.server, token.sweeper, token.heartbeat, token.keySync, token.keyRotation, identity.anonymousSweeper,
                identity.outboxDelivery, identity.changeLog,
            ] + [identity.adminAPI, identity.appleRevocations].compactMap { $0 } + [gateway.application], logger: logger)
    }

    static func runGroup(_ services: [any Service], logger: Logger) async throws {
        let group = ServiceGroup(configuration: .init(
            services: services.map { .init(service: $0) },
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await group.run()
    }
}
