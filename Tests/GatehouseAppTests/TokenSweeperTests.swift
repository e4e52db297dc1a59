import Foundation
@testable import SQLiteStores
import GatehouseContracts
import GatehouseTestSupport
import Logging
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing
import TokenCore
import TokenService
@testable import GatehouseApp
import RPCRouting
import TokenPorts

/// Stands in for the sweeper's sleep between passes: each call is recorded and returns only
/// when the test lets one pass through (or the task is cancelled, as at shutdown), so passes
/// run on demand and no test waits for time to pass.
final class SweepTicks: Sendable {
    private struct State {
        var requested: [Duration] = []
        var granted = 0
        var waiting: [(id: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var cancelled: Set<Int> = []
    }
    private let state = Mutex(State())

    /// The delays the sweeper asked to sleep, in order.
    var requested: [Duration] { state.withLock { $0.requested } }

    /// The sleep the sweeper calls: returns once `allow()` lets it, throws once cancelled.
    func sleep(_ delay: Duration) async throws {
        let id = state.withLock { state in
            state.requested.append(delay)
            return state.requested.count
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resume = state.withLock { state -> Bool in
                    if state.cancelled.remove(id) != nil { return true }
                    if state.granted > 0 {
                        state.granted -= 1
                        return true
                    }
                    state.waiting.append((id, continuation))
                    return false
                }
                if resume { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if let index = state.waiting.firstIndex(where: { $0.id == id }) { return state.waiting.remove(at: index).continuation }
                state.cancelled.insert(id)
                return nil
            }
            waiter?.resume()
        }
        try Task.checkCancellation()
    }

    /// Ends one sleep (the one waiting, or the next).
    func allow() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.granted += 1
                return nil
            }
            return state.waiting.removeFirst().continuation
        }
        waiter?.resume()
    }
}

@Suite("Token sweeper")
struct TokenSweeperTests {
    /// A token service on a real SQLite file, holding one session revoked 8 days ago (due for a
    /// sweep under the default 7-day retention).
    static func serviceWithDueSession() async throws -> (TokenService, TemporaryDirectory) {
        let dir = try TemporaryDirectory(prefix: "sweeper")
        let config = TokenConfiguration(issuer: "https://auth.test", audience: "app")
        let identity = FakeIdentityService(unknownUser: UserClaims(email: "a@example.com"))
        let clock = ManualClock()
        let service = try await TokenService.start(
            configuration: config, store: SQLiteTokenStore(path: dir.path("token.sqlite")), identity: identity.caller, clock: clock.wallClock)
        let tokens = try await service.issueSession(IssueSessionRequest(
            userID: "user-1", claims: UserClaims(email: "a@example.com"), amr: ["pwd"], authTime: clock.now,
            client: ClientInfo(userAgent: "tests", ip: "127.0.0.1")))
        _ = try await service.revokeSession(RevokeSessionRequest(sessionID: tokens.sessionID, reason: ""))
        clock.advance(by: 8 * 86_400)
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
        defer { dir.remove() }
        let ticks = SweepTicks()
        var sweeper = TokenSweeper(service: service, interval: .seconds(600), logger: Logger(label: "test"))
        sweeper.sleep = { try await ticks.sleep($0) }
        try await Self.run(sweeper) {
            // Nothing is swept before the first delay has passed.
            try await waitUntil("the sweeper waiting for its first pass") { ticks.requested.count == 1 }
            #expect(try await service.store.rowCounts().sessions == 1)
            ticks.allow()
            try await waitUntil("the first pass deleted the due session") { try await service.store.rowCounts().sessions == 0 }
            // Then it waits one interval before the next pass.
            try await waitUntil("the sweeper waiting for its second pass") { ticks.requested.count == 2 }
            #expect(ticks.requested == [.seconds(60), .seconds(600)])
        }
    }

    @Test("with the sweep turned off it deletes nothing and still stops on shutdown")
    func turnedOff() async throws {
        let (service, dir) = try await Self.serviceWithDueSession()
        defer { dir.remove() }
        let ticks = SweepTicks()
        var sweeper = TokenSweeper(service: service, interval: nil, logger: Logger(label: "test"))
        sweeper.sleep = { try await ticks.sleep($0) }
        try await Self.run(sweeper) {}
        // It never waited for a pass, so it never swept.
        #expect(ticks.requested.isEmpty)
        #expect(try await service.store.rowCounts().sessions == 1)
    }

    @Test("GATEHOUSE_SESSION_RETENTION and GATEHOUSE_SWEEP_INTERVAL: defaults, bounds, and errors naming the key")
    func configuration() throws {
        let defaults = try TokenRoleSettings(config: Config(environment: ["GATEHOUSE_ALLOW_PLAINTEXT": "true"]))
        #expect(defaults.service.sessionRetention == 7 * 86_400)
        #expect(defaults.sweepInterval == 600)
        let set = try TokenRoleSettings(config: Config(environment: ["GATEHOUSE_SESSION_RETENTION": "86400", "GATEHOUSE_SWEEP_INTERVAL": "0", "GATEHOUSE_ALLOW_PLAINTEXT": "true"]))
        #expect(set.service.sessionRetention == 86_400)
        #expect(set.sweepInterval == 0)
        for (key, value) in [("GATEHOUSE_SESSION_RETENTION", "60"), ("GATEHOUSE_SESSION_RETENTION", "a week"), ("GATEHOUSE_SWEEP_INTERVAL", "-1")] {
            do {
                _ = try TokenRoleSettings(config: Config(environment: [key: value, "GATEHOUSE_ALLOW_PLAINTEXT": "true"]))
                Issue.record("\(key)=\(value) was accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains(key))
            }
        }
    }

    @Test("GATEHOUSE_SIGNING_KEY_ROTATION_DAYS: off by default and at 0, days to seconds, other values refused naming the key and its range")
    func rotationSchedule() throws {
        let plain = ["GATEHOUSE_ALLOW_PLAINTEXT": "true"]
        #expect(try TokenRoleSettings(config: Config(environment: plain)).service.keyRotationInterval == nil)
        let off = try TokenRoleSettings(config: Config(environment: plain.merging(["GATEHOUSE_SIGNING_KEY_ROTATION_DAYS": "0"]) { $1 }))
        #expect(off.service.keyRotationInterval == nil)
        let set = try TokenRoleSettings(config: Config(environment: plain, arguments: ["--signing-key-rotation-days", "90"]))
        #expect(set.service.keyRotationInterval == TimeInterval(90 * 86_400))
        for value in ["-1", "3651", "ninety", "1.5"] {
            do {
                _ = try TokenRoleSettings(config: Config(environment: plain.merging(["GATEHOUSE_SIGNING_KEY_ROTATION_DAYS": value]) { $1 }))
                Issue.record("GATEHOUSE_SIGNING_KEY_ROTATION_DAYS=\(value) was accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains("GATEHOUSE_SIGNING_KEY_ROTATION_DAYS (--signing-key-rotation-days) must be an integer in 0...3650"), "\(error.message)")
            }
        }
    }
}
