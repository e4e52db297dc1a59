import Foundation
import IdentityPorts
import GatehouseSupport
import GatehouseTestSupport
import IdentityCore
import IdentityService
import Logging
import PostgresNIO
import PostgresStores
import PostgresSupport
import ProviderTokens
import Synchronization
import Testing

/// Issue 24: what one identity instance kept in memory, shared by two `PostgresUserStore`s on one
/// database (two instances): migration resume handles, the provider-token replay guard, and the
/// lead of background jobs.
@Suite("Shared identity state on PostgreSQL")
struct SharedIdentityStateTests {
    /// Two migrated stores over one fresh database, each on a client of its own (`twoPostgresStores`).
    static func pair() async throws -> (PostgresUserStore, PostgresUserStore, @Sendable () -> Void) {
        try await twoPostgresStores()
    }

    static let now = Date(timeIntervalSince1970: 1_750_000_000)

    static func target() throws -> UserRecord {
        UserRecord(
            id: .random(), email: try EmailAddress("target@example.com"),
            passwordHash: "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA", createdAt: now)
    }

    @Test("a resume handle issued on one instance is taken on the other, once; a handle of another caller is not taken")
    func resumeHandleAcrossInstances() async throws {
        let (a, b, stop) = try await Self.pair()
        defer { stop() }
        let handles = ResumeHandles(ttl: 300)
        let anonymous = UserID.random(), target = try Self.target()
        var identity = ResumeHandles.ProviderIdentity(provider: "apple.com", subject: "001.apple")
        identity.appleRefreshToken = "apple-refresh-secret"
        let handle = try await handles.issue(
            anonymousUserID: anonymous, sessionID: "s1", target: target, providerIdentity: identity, now: Self.now, shared: a)
        #expect(handles.count == 0, "kept in the database, not in memory")
        // Another caller, or another session, takes nothing, and leaves the handle.
        #expect(try await handles.take(handle, userID: .random(), sessionID: "s1", now: Self.now, shared: b) == nil)
        #expect(try await handles.take(handle, userID: anonymous, sessionID: "s2", now: Self.now, shared: b) == nil)
        let entry = try #require(try await handles.take(handle, userID: anonymous, sessionID: "s1", now: Self.now, shared: b))
        #expect(entry.targetUserID == target.id)
        #expect(entry.targetPasswordHash == target.passwordHash)
        #expect(entry.providerIdentity?.subject == "001.apple")
        #expect(entry.providerIdentity?.appleRefreshToken == "apple-refresh-secret")
        // Single use, on either instance.
        #expect(try await handles.take(handle, userID: anonymous, sessionID: "s1", now: Self.now, shared: a) == nil)
        #expect(try await handles.take(handle, userID: anonymous, sessionID: "s1", now: Self.now, shared: b) == nil)
    }

    @Test("a resume handle raced on two instances 20 times is taken exactly once each time")
    func resumeHandleRace() async throws {
        let (a, b, stop) = try await Self.pair()
        defer { stop() }
        let handles = ResumeHandles(ttl: 300)
        for _ in 0..<20 {
            let anonymous = UserID.random()
            let handle = try await handles.issue(anonymousUserID: anonymous, sessionID: "s", target: try Self.target(), now: Self.now, shared: a)
            let taken = try await withThrowingTaskGroup(of: Bool.self) { group in
                for store in [a, b, a, b] {
                    group.addTask { try await handles.take(handle, userID: anonymous, sessionID: "s", now: Self.now, shared: store) != nil }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(taken == 1)
        }
    }

    @Test("a resume handle expires; the database keeps neither the handle nor a readable entry")
    func resumeHandleExpiryAndSealing() async throws {
        let (a, b, stop) = try await Self.pair()
        defer { stop() }
        let handles = ResumeHandles(ttl: 60)
        let anonymous = UserID.random(), target = try Self.target()
        let handle = try await handles.issue(anonymousUserID: anonymous, sessionID: "s", target: target, now: Self.now, shared: a)
        #expect(try await handles.take(handle, userID: anonymous, sessionID: "s", now: Self.now + 61, shared: b) == nil)
        // A fresh one, read straight from the table: no handle, no password hash in clear.
        _ = try await handles.issue(anonymousUserID: anonymous, sessionID: "s", target: target, now: Self.now, shared: a)
        let rows = try await a.rawResumeHandleRows()
        #expect(rows.count >= 1)
        for row in rows {
            #expect(!row.contains(Data(handle.utf8)))
            #expect(!row.contains(Data(target.passwordHash!.utf8)))
        }
        #expect(try await a.purgeExpiredHandles(now: Self.now + 61) >= 2)
        #expect(try await a.rawResumeHandleRows().isEmpty)
    }

    @Test("a provider token accepted on one instance is a replay on the other until it expires; raced, exactly one accepts")
    func replayGuardAcrossInstances() async throws {
        let (a, b, stop) = try await Self.pair()
        defer { stop() }
        let until = Self.now + 600
        #expect(try await a.acceptProviderToken("google\u{0}iss\u{0}jti:1", until: until, now: Self.now))
        #expect(try await !b.acceptProviderToken("google\u{0}iss\u{0}jti:1", until: until, now: Self.now + 10))
        #expect(try await b.acceptProviderToken("google\u{0}iss\u{0}jti:2", until: until, now: Self.now))
        // Once expired, the id is accepted again (a provider may reuse a jti much later).
        #expect(try await b.acceptProviderToken("google\u{0}iss\u{0}jti:1", until: until + 600, now: until))
        for round in 0..<10 {
            let accepted = try await withThrowingTaskGroup(of: Bool.self) { group in
                for store in [a, b, a, b] {
                    group.addTask { try await store.acceptProviderToken("race-\(round)", until: until, now: Self.now) }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(accepted == 1)
        }
    }

    @Test("runIfLeader: of two identity instances asking at once exactly one leads; then the other can")
    func leaderElection() async throws {
        let (a, b, stop) = try await Self.pair()
        defer { stop() }
        let running = Tally(), most = Tally()
        let led = try await withThrowingTaskGroup(of: Bool.self) { group in
            for store in [a, b] {
                group.addTask {
                    try await store.runIfLeader("outbox") {
                        most.raise(to: running.add(1))
                        try await Task.sleep(for: .milliseconds(300))
                        running.add(-1)
                    }
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(led == 1)
        #expect(most.value == 1)
        #expect(try await b.runIfLeader("outbox") {})
        #expect(try await a.runIfLeader("outbox") {})
        // A job's error passes through, and the lead is released.
        await #expect(throws: CancellationError.self) { _ = try await a.runIfLeader("outbox") { throw CancellationError() } }
        #expect(try await b.runIfLeader("outbox") {})
    }
}

/// A number several tasks change.
final class Tally: Sendable {
    private let count = Mutex(0)
    @discardableResult func add(_ n: Int) -> Int { count.withLock { $0 += n; return $0 } }
    func raise(to n: Int) { count.withLock { $0 = max($0, n) } }
    var value: Int { count.withLock { $0 } }
}
