import Foundation
import IdentityPorts
@testable import SQLiteStores
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import IdentityCore
import IdentityService
import Logging
import RPCRouting
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing
import TokenCore
import TokenService
@testable import GatehouseApp
import TokenPorts

/// The real identity and token services in this process, each on its own SQLite file, both on
/// one manual clock, linked by `LocalCaller`s (every message encoded and decoded as on the wire).
/// While `failTokens` holds an error, every call of the identity service to the token service
/// fails with it (the token service unreachable).
final class SweepServices: Sendable {
    let dir: TemporaryDirectory
    let clock: ManualClock
    let token: TokenService
    let identity: IdentityService
    let events: RecordingEventSink
    let failTokens = FailureSwitch()

    init(retention: TimeInterval = 30 * 86_400) async throws {
        dir = try TemporaryDirectory(prefix: "anonymous-sweep")
        let clock = ManualClock()
        self.clock = clock
        let identityCaller = LateCaller()
        token = try await TokenService.start(
            configuration: TokenConfiguration(issuer: "https://auth.test", audience: "app"), store: SQLiteTokenStore(path: dir.path("token.sqlite")),
            identity: identityCaller, clock: clock.wallClock)
        var configuration = IdentityConfiguration(argon2: .testing, hashWorkers: 1)
        let users = try await SQLiteUserStore.open(path: dir.path("identity.sqlite"))
        try await users.migrate()
        configuration.anonymousRetention = retention
        let events = RecordingEventSink()
        self.events = events
        identity = try await IdentityService.start(
            configuration: configuration, store: users, tokens: FailingCaller(base: LocalCaller(router: token.router()), failure: failTokens),
            events: events, clock: clock.wallClock)
        identityCaller.set(LocalCaller(router: identity.router))
    }

    deinit { dir.remove() }

    /// A sweep of these services with other settings than the identity service's own.
    func sweep(retention: TimeInterval = 30 * 86_400, batchSize: Int = 500, maxBatches: Int = 1000) -> AnonymousSweep {
        AnonymousSweep(
            store: identity.store, tokens: FailingCaller(base: LocalCaller(router: token.router()), failure: failTokens), events: events,
            clock: clock.wallClock, retention: retention, batchSize: batchSize, maxBatches: maxBatches)
    }

    /// A new anonymous user and its session (`identity.signInAnonymously`).
    func anonymous() async throws -> AuthResponse {
        try await identity.handlers.accounts.signInAnonymously(SignInAnonymouslyRequest(client: ClientInfo(userAgent: "tests", ip: "127.0.0.1")))
    }

    /// Refreshes with `refreshToken` at the token service, as the gateway would.
    func refresh(_ refreshToken: String) async throws -> SessionTokens {
        try await token.refresh(RefreshRequest(refreshToken: refreshToken))
    }

    /// Whether the identity service still holds `userID`.
    func exists(_ userID: String) async throws -> Bool { try await identity.store.user(id: UserID(userID)) != nil }

    /// The ids of the `user.deleted` events published so far.
    func deletedEvents() throws -> [String] {
        try events.decoded().filter { $0.topic == IdentityAPI.Topic.userDeleted }.map(\.event.userID)
    }

    /// The wire code `body` fails with (nil: it succeeded).
    func code<T>(_ body: () async throws -> T) async -> ErrorCode? {
        do {
            _ = try await body()
            return nil
        } catch let error as TokenError {
            return error.code
        } catch let error as RPCError {
            return error.code
        } catch {
            return "unexpected"
        }
    }
}

/// An error every call fails with while it is set.
final class FailureSwitch: Sendable {
    private let error = Mutex<RPCError?>(nil)
    /// Sets (or clears, with nil) the error.
    func set(_ error: RPCError?) { self.error.withLock { $0 = error } }
    /// The error set, if any.
    var current: RPCError? { error.withLock { $0 } }
}

/// Calls the identity service once it exists (the token service is started first).
private final class LateCaller: RPCCaller, Sendable {
    private let caller = Mutex<(any RPCCaller)?>(nil)

    func set(_ caller: any RPCCaller) { self.caller.withLock { $0 = caller } }

    private func target() throws -> any RPCCaller {
        guard let caller = caller.withLock({ $0 }) else { throw RPCError(.unavailable, "not started") }
        return caller
    }

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res {
        try await target().call(method, request, timeout: timeout)
    }

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res {
        try await target().call(method, request, deadline: deadline)
    }
}

/// Fails every call with the switch's error while it is set, else calls `base`.
private struct FailingCaller: RPCCaller {
    let base: LocalCaller
    let failure: FailureSwitch

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res {
        if let error = failure.current { throw error }
        return try await base.call(method, request, timeout: timeout)
    }

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res {
        if let error = failure.current { throw error }
        return try await base.call(method, request, deadline: deadline)
    }
}

private let day: TimeInterval = 86_400

@Suite("Anonymous sweep: identity and token services in process")
struct AnonymousSweepTests {
    /// Runs `service` in a service group while `body` runs, then shuts the group down
    /// gracefully and waits for it to finish.
    static func run(_ service: some Service, while body: @Sendable () async throws -> Void) async throws {
        try await testGracefulShutdown { trigger in
            let group = ServiceGroup(configuration: .init(services: [service], logger: Logger(label: "test")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                try await body()
                trigger.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
    }

    @Test("an anonymous user idle past the retention is removed with its sessions: refresh refused, user.deleted published")
    func idleUserRemoved() async throws {
        let s = try await SweepServices()
        let idle = try await s.anonymous()
        let kept = try await s.anonymous()
        s.clock.advance(by: 29 * day)
        // Within the retention nothing goes.
        #expect(try await s.identity.anonymousSweep.sweep() == AnonymousSweep.Counts())
        _ = try await s.refresh(kept.tokens.refreshToken)
        s.clock.advance(by: 2 * day)

        let counts = try await s.identity.anonymousSweep.sweep()
        #expect(counts == AnonymousSweep.Counts(deleted: 1, active: 1))
        #expect(try await !s.exists(idle.user.id))
        #expect(try await s.exists(kept.user.id))
        // Its session was revoked in the token service (committed), for the reason of the sweep.
        let session = try #require(try await s.token.store.session(id: idle.tokens.sessionID))
        #expect(session.revokedAt != nil && session.revokeReason == "anonymous_expired")
        #expect(await s.code { try await s.refresh(idle.tokens.refreshToken) } == .sessionRevoked)
        #expect(try s.deletedEvents() == [idle.user.id])
        // In the audit log, by the system (issue 22 §3), in the deletion's transaction.
        let swept = try await s.identity.handlers.audit.listAudit(ListAuditRequest()).events.filter { $0.kind == "anonymous.swept" }
        #expect(swept.map(\.userID) == [idle.user.id] && swept.allSatisfy { $0.actor == "system" })
        // A second pass finds nothing more.
        #expect(try await s.identity.anonymousSweep.sweep() == AnonymousSweep.Counts())
    }

    @Test("a user that keeps refreshing is never removed; once it stops for the retention it is")
    func refreshingUserKept() async throws {
        let s = try await SweepServices()
        let user = try await s.anonymous()
        var refreshToken = user.tokens.refreshToken
        // A refresh at days 20, 40 and 55 (within the session's 60-day lifetime): never idle for 30.
        // Day 40: a candidate by its creation, found active (the refresh of that day); remembered.
        for (days, counts) in [(20.0, AnonymousSweep.Counts()), (20, AnonymousSweep.Counts(active: 1)), (15, AnonymousSweep.Counts())] {
            s.clock.advance(by: days * day)
            refreshToken = try await s.refresh(refreshToken).refreshToken
            #expect(try await s.identity.anonymousSweep.sweep() == counts)
            #expect(try await s.exists(user.user.id))
        }
        // Day 84: remembered active at day 40, asked again, active at day 55: kept.
        s.clock.advance(by: 29 * day)
        #expect(try await s.identity.anonymousSweep.sweep() == AnonymousSweep.Counts(active: 1))
        #expect(try await s.exists(user.user.id))
        // Day 86: thirty-one days after its last refresh, it goes.
        s.clock.advance(by: 2 * day)
        #expect(try await s.identity.anonymousSweep.sweep() == AnonymousSweep.Counts(deleted: 1))
        #expect(try await !s.exists(user.user.id))
    }

    @Test("a user with an email is never touched, however long idle")
    func nonAnonymousUntouched() async throws {
        let s = try await SweepServices()
        let signedUp = try await s.identity.handlers.accounts.signUp(SignUpRequest(email: "kept@example.com", password: "correct horse battery staple"))
        s.clock.advance(by: 400 * day)
        #expect(try await s.identity.anonymousSweep.sweep() == AnonymousSweep.Counts())
        #expect(try await s.exists(signedUp.user.id))
        let session = try #require(try await s.token.store.session(id: signedUp.tokens.sessionID))
        #expect(session.revokedAt == nil)
        #expect(try s.deletedEvents().isEmpty)
    }

    @Test("a retention of 0 turns the sweep off")
    func zeroDisables() async throws {
        let s = try await SweepServices(retention: 0)
        let user = try await s.anonymous()
        s.clock.advance(by: 400 * day)
        #expect(!s.identity.anonymousSweep.isEnabled)
        #expect(try await s.identity.anonymousSweep.sweep() == AnonymousSweep.Counts())
        #expect(try await s.exists(user.user.id))
    }

    @Test("a pass works in bounded batches, and stops after its most batches (the rest waits for the next pass)")
    func batches() async throws {
        let s = try await SweepServices()
        var ids: [String] = []
        for _ in 0..<5 { ids.append(try await s.anonymous().user.id) }
        s.clock.advance(by: 31 * day)
        #expect(try await s.sweep(batchSize: 2, maxBatches: 2).sweep().deleted == 4)
        #expect(try await s.sweep(batchSize: 2).sweep().deleted == 1)
        for id in ids { #expect(try await !s.exists(id)) }
        #expect(Set(try s.deletedEvents()) == Set(ids))
    }

    @Test("a failed pass deletes nothing it cannot finish; the next pass completes it")
    func failureRetried() async throws {
        let s = try await SweepServices()
        let user = try await s.anonymous()
        s.clock.advance(by: 31 * day)
        s.failTokens.set(RPCError(.unavailable, "token service down"))
        await #expect(throws: RPCError.self) { try await s.identity.anonymousSweep.sweep() }
        // The token service could not be asked about the user's sessions: it is still there.
        #expect(try await s.exists(user.user.id))
        s.failTokens.set(nil)
        #expect(try await s.identity.anonymousSweep.sweep().deleted == 1)
        #expect(await s.code { try await s.refresh(user.tokens.refreshToken) } == .sessionRevoked)
    }

    @Test("a user deleted whose revocation failed has its sessions revoked at the next pass")
    func revocationRetried() async throws {
        let s = try await SweepServices()
        let user = try await s.anonymous()
        s.clock.advance(by: 31 * day)
        // token.lastActivity answers, then token.revokeAllSessions fails.
        let sweep = AnonymousSweep(
            store: s.identity.store, tokens: RevokeFailsOnce(base: LocalCaller(router: s.token.router())), events: s.events,
            clock: s.clock.wallClock, retention: 30 * day)
        await #expect(throws: RPCError.self) { try await sweep.sweep() }
        #expect(try await !s.exists(user.user.id))
        #expect(try s.deletedEvents().isEmpty)
        #expect(try await sweep.sweep() == AnonymousSweep.Counts())
        let session = try #require(try await s.token.store.session(id: user.tokens.sessionID))
        #expect(session.revokeReason == "anonymous_expired")
        #expect(try s.deletedEvents() == [user.user.id])
    }

    @Test("the sweeper runs passes on its interval in a service group, survives a failed pass, and stops at shutdown")
    func sweeperService() async throws {
        let s = try await SweepServices()
        let first = try await s.anonymous()
        s.clock.advance(by: 31 * day)
        let ticks = SweepTicks()
        var sweeper = AnonymousSweeper(sweep: s.identity.anonymousSweep, interval: .seconds(3_600), logger: Logger(label: "test"))
        sweeper.sleep = { try await ticks.sleep($0) }
        try await testGracefulShutdown { trigger in
            let group = ServiceGroup(configuration: .init(services: [sweeper], logger: Logger(label: "test")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                try await waitUntil("the sweeper waiting for its first pass") { ticks.requested.count == 1 }
                #expect(try await s.exists(first.user.id))
                // The first pass fails (the token service is down); the sweeper carries on.
                s.failTokens.set(RPCError(.unavailable, "token service down"))
                ticks.allow()
                try await waitUntil("the sweeper waiting for its second pass") { ticks.requested.count == 2 }
                #expect(try await s.exists(first.user.id))
                s.failTokens.set(nil)
                ticks.allow()
                try await waitUntil("the second pass removed the user") { try await !s.exists(first.user.id) }
                #expect(ticks.requested.prefix(2) == [.seconds(60), .seconds(3_600)])
                trigger.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
        }
    }

    @Test("with a retention of 0 or no interval, the sweeper only waits for shutdown")
    func sweeperOff() async throws {
        let s = try await SweepServices(retention: 0)
        for sweep in [s.identity.anonymousSweep, s.sweep(retention: 30 * day)] {
            let ticks = SweepTicks()
            var sweeper = AnonymousSweeper(
                sweep: sweep, interval: sweep.isEnabled ? nil : .seconds(3_600), logger: Logger(label: "test"))
            sweeper.sleep = { try await ticks.sleep($0) }
            try await Self.run(sweeper) {}
            #expect(ticks.requested.isEmpty)
        }
    }

    @Test("GATEHOUSE_ANONYMOUS_RETENTION and GATEHOUSE_ANONYMOUS_SWEEP_INTERVAL: defaults, 0, bounds, and errors naming the key")
    func configuration() throws {
        let plain = ["GATEHOUSE_ALLOW_PLAINTEXT": "true"]
        let defaults = try IdentityRoleSettings(config: Config(environment: plain))
        #expect(defaults.service.anonymousRetention == 30 * day)
        #expect(defaults.anonymousSweepInterval == 3_600)
        let set = try IdentityRoleSettings(config: Config(
            environment: plain.merging(["GATEHOUSE_ANONYMOUS_RETENTION": "0", "GATEHOUSE_ANONYMOUS_SWEEP_INTERVAL": "0"]) { $1 }))
        #expect(set.service.anonymousRetention == 0)
        #expect(set.anonymousSweepInterval == 0)
        let flags = try IdentityRoleSettings(config: Config(
            environment: plain, arguments: ["--anonymous-retention", "86400", "--anonymous-sweep-interval=60", "--session-idle-ttl", "86400"]))
        #expect(flags.service.anonymousRetention == day)
        #expect(flags.anonymousSweepInterval == 60)
        for (key, value) in [
            ("GATEHOUSE_ANONYMOUS_RETENTION", "60"), ("GATEHOUSE_ANONYMOUS_RETENTION", "30 days"), ("GATEHOUSE_ANONYMOUS_RETENTION", "-1"),
            ("GATEHOUSE_ANONYMOUS_SWEEP_INTERVAL", "-1"), ("GATEHOUSE_ANONYMOUS_SWEEP_INTERVAL", "86401"),
            // Shorter than the session idle timeout (30 days by default).
            ("GATEHOUSE_ANONYMOUS_RETENTION", "86400"),
        ] {
            do {
                _ = try IdentityRoleSettings(config: Config(environment: plain.merging([key: value]) { $1 }))
                Issue.record("\(key)=\(value) was accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains(key))
            }
        }
    }
}

/// Answers every method from `base`, except that the first `token.revokeAllSessions` fails.
private final class RevokeFailsOnce: RPCCaller, Sendable {
    let base: LocalCaller
    private let failed = Mutex(false)

    init(base: LocalCaller) { self.base = base }

    private func check(_ name: String) throws {
        guard name == TokenAPI.revokeAllSessions.name else { return }
        if failed.withLock({ done in defer { done = true }; return !done }) { throw RPCError(.unavailable, "token service down") }
    }

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res {
        try check(method.name)
        return try await base.call(method, request, timeout: timeout)
    }

    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res {
        try check(method.name)
        return try await base.call(method, request, deadline: deadline)
    }
}
