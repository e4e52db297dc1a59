import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseSupport
import GatehouseTestSupport
import GRDB
import IdentityCore
@testable import IdentityService
import Testing

/// The store's part of the anonymous sweep (`AnonymousSweepStore`), the same for every store.
@Suite("Anonymous sweep: store")
struct AnonymousSweepStoreTests {
    static func anonymous(at date: Date) -> UserRecord {
        UserRecord(id: .random(), email: nil, isAnonymous: true, createdAt: date, lastSignInAt: date)
    }

    @Test("candidates: anonymous users inactive before the cutoff, least recently active first, at most the limit", arguments: StoreKind.allCases + [.postgres])
    func candidates(kind: StoreKind) async throws {
        let (base, cleanup) = try await kind.make()
        defer { cleanup() }
        let store: any AnonymousSweepStore = base
        let old = Self.anonymous(at: t0)
        let older = Self.anonymous(at: t0.addingTimeInterval(-86_400))
        let recent = Self.anonymous(at: t0.addingTimeInterval(40 * 86_400))
        var signedIn = Self.anonymous(at: t0.addingTimeInterval(-2 * 86_400))
        signedIn.lastSignInAt = t0.addingTimeInterval(35 * 86_400)
        let withEmail = try makeUser("kept@example.com", at: t0.addingTimeInterval(-10 * 86_400))
        for user in [old, older, recent, signedIn, withEmail] { try await store.insert(user) }
        let cutoff = t0.addingTimeInterval(30 * 86_400)

        let all = try await store.anonymousCandidates(inactiveBefore: cutoff, limit: 10)
        #expect(all == [AnonymousCandidate(id: older.id, lastActivity: older.createdAt), AnonymousCandidate(id: old.id, lastActivity: old.createdAt)])
        #expect(try await store.anonymousCandidates(inactiveBefore: cutoff, limit: 1).map(\.id) == [older.id])
        #expect(try await store.anonymousCandidates(inactiveBefore: t0, limit: 10).map(\.id) == [older.id])
    }

    @Test("recorded session activity takes a candidate out until the cutoff passes it; it never moves back", arguments: StoreKind.allCases + [.postgres])
    func sessionActivity(kind: StoreKind) async throws {
        let (base, cleanup) = try await kind.make()
        defer { cleanup() }
        let store: any AnonymousSweepStore = base
        let user = Self.anonymous(at: t0)
        try await store.insert(user)
        let used = t0.addingTimeInterval(35 * 86_400)
        try await store.recordSessionActivity([user.id: used, UserID.random(): used])
        #expect(try await store.anonymousCandidates(inactiveBefore: t0.addingTimeInterval(30 * 86_400), limit: 10).isEmpty)
        // An older activity learned later does not move it back.
        try await store.recordSessionActivity([user.id: t0.addingTimeInterval(86_400)])
        #expect(try await store.anonymousCandidates(inactiveBefore: used, limit: 10).isEmpty)
        let later = try await store.anonymousCandidates(inactiveBefore: used.addingTimeInterval(1), limit: 10)
        #expect(later == [AnonymousCandidate(id: user.id, lastActivity: used)])
        // The profile is unchanged: no new version, no new updatedAt.
        let stored = try #require(try await store.user(id: user.id))
        #expect(stored.version == user.version && stored.updatedAt == user.updatedAt)
    }

    @Test("deleteAnonymous deletes only a user still anonymous and still inactive", arguments: StoreKind.allCases + [.postgres])
    func conditionalDelete(kind: StoreKind) async throws {
        let (base, cleanup) = try await kind.make()
        defer { cleanup() }
        let store: any AnonymousSweepStore = base
        let cutoff = t0.addingTimeInterval(30 * 86_400)
        let idle = Self.anonymous(at: t0)
        let upgraded = Self.anonymous(at: t0)
        let active = Self.anonymous(at: t0)
        let withEmail = try makeUser("never@example.com", at: t0)
        for user in [idle, upgraded, active, withEmail] { try await store.insert(user) }
        // Upgraded in place after being listed (issue 18 §2): an email, no longer anonymous.
        _ = try await store.update(id: upgraded.id, expectedVersion: nil, now: t0) { user in
            user.isAnonymous = false
            user.email = "upgraded@example.com"
            user.emailNormalized = "upgraded@example.com"
        }
        try await store.recordSessionActivity([active.id: cutoff])

        #expect(try await store.deleteAnonymous(id: idle.id, inactiveBefore: cutoff))
        #expect(try await store.user(id: idle.id) == nil)
        #expect(try await !store.deleteAnonymous(id: idle.id, inactiveBefore: cutoff))
        #expect(try await !store.deleteAnonymous(id: upgraded.id, inactiveBefore: cutoff))
        #expect(try await !store.deleteAnonymous(id: active.id, inactiveBefore: cutoff))
        #expect(try await !store.deleteAnonymous(id: withEmail.id, inactiveBefore: cutoff))
        #expect(try await store.count() == 3)
    }

    @Test("the candidates are read through the partial index on the activity of anonymous users")
    func queryPlan() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await dir.migratedStore()
        for i in 0..<200 { try await store.insert(try makeUser("plan\(i)@example.com")) }
        for i in 0..<50 { try await store.insert(Self.anonymous(at: t0.addingTimeInterval(Double(i) * 3_600))) }
        let queue = try DatabaseQueue(path: dir.databasePath)
        let plan = try await queue.write { db -> [String] in
            try db.execute(sql: "ANALYZE")
            return try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + SQLiteUserStore.anonymousCandidatesSQL, arguments: [t0.millisecondsSince1970, 500])
                .map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("USING INDEX users_anonymous_activity") }, "plan: \(plan)")
        #expect(!plan.contains { $0.hasPrefix("SCAN users") && !$0.contains("INDEX") }, "plan: \(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "plan: \(plan)")
    }
}
