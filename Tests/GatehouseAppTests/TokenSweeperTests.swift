import Foundation
import GatehouseContracts
import Logging
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing
import TokenCore
import TokenService
@testable import GatehouseApp
import RPCRouting

/// A clock the test moves.
final class MovableClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

@Suite("Token sweeper")
struct TokenSweeperTests {
    /// A token service on a real SQLite file, holding one session revoked 8 days ago (due for a
    /// sweep under the default 7-day retention).
    static func serviceWithDueSession() async throws -> (TokenService, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sweeper-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let config = TokenConfiguration(databasePath: dir.appendingPathComponent("token.sqlite").path, issuer: "https://auth.test", audience: "app")
        var identity = RPCRouter()
        identity.register(ServiceContracts.claimsForSession) { _, _ in UserClaims(email: "a@example.com") }
        let clock = MovableClock()
        let service = try await TokenService.start(
            configuration: config, identity: LocalCaller(router: identity), now: { clock.now })
        let tokens = try await service.issueSession(IssueSessionRequest(
            userID: "user-1", claims: UserClaims(email: "a@example.com"), amr: ["pwd"], authTime: clock.now,
            client: ClientInfo(userAgent: "tests", ip: "127.0.0.1")))
        _ = try await service.revokeSession(RevokeSessionRequest(sessionID: tokens.sessionID, reason: ""))
        clock.advance(8 * 86_400)
        return (service, dir)
    }

    /// Runs `sweeper` in a service group while `body` runs, then shuts the group down gracefully
    /// and waits for it to finish.
    static func run(_ sweeper: TokenSweeper, while body: @Sendable () async throws -> Void) async throws {
        try await testGracefulShutdown { trigger in
            let group = ServiceGroup(configuration: .init(services: [sweeper], logger: Logger(label: "test")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                try await body()
                trigger.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
    }

    @Test("in a service group it sweeps on its interval, and graceful shutdown stops it")
    func sweepsUntilShutdown() async throws {
        let (service, dir) = try await Self.serviceWithDueSession()
        defer { try? FileManager.default.removeItem(at: dir) }
        var sweeper = TokenSweeper(service: service, interval: .milliseconds(50), logger: Logger(label: "test"))
        sweeper.firstDelay = Duration.milliseconds(10)
        try await Self.run(sweeper) {
            var swept = false
            for _ in 0..<200 where !swept {
                try await Task.sleep(for: .milliseconds(10))
                swept = try await service.store.rowCounts().sessions == 0
            }
            #expect(swept)
        }
    }

    @Test("with the sweep turned off it deletes nothing and still stops on shutdown")
    func turnedOff() async throws {
        let (service, dir) = try await Self.serviceWithDueSession()
        defer { try? FileManager.default.removeItem(at: dir) }
        var sweeper = TokenSweeper(service: service, interval: nil, logger: Logger(label: "test"))
        sweeper.firstDelay = Duration.milliseconds(1)
        try await Self.run(sweeper) { try await Task.sleep(for: .milliseconds(100)) }
        #expect(try await service.store.rowCounts().sessions == 1)
    }

    @Test("GATEHOUSE_SESSION_RETENTION and GATEHOUSE_SWEEP_INTERVAL: defaults, bounds, and errors naming the key")
    func configuration() throws {
        let defaults = try TokenRoleSettings(config: Config(environment: [:]))
        #expect(defaults.service.sessionRetention == 7 * 86_400)
        #expect(defaults.sweepInterval == 600)
        let set = try TokenRoleSettings(config: Config(environment: ["GATEHOUSE_SESSION_RETENTION": "86400", "GATEHOUSE_SWEEP_INTERVAL": "0"]))
        #expect(set.service.sessionRetention == 86_400)
        #expect(set.sweepInterval == 0)
        for (key, value) in [("GATEHOUSE_SESSION_RETENTION", "60"), ("GATEHOUSE_SESSION_RETENTION", "a week"), ("GATEHOUSE_SWEEP_INTERVAL", "-1")] {
            do {
                _ = try TokenRoleSettings(config: Config(environment: [key: value]))
                Issue.record("\(key)=\(value) was accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains(key))
            }
        }
    }
}
