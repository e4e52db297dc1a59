import Foundation
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import IdentityCore
import IdentityService
import PostgresNIO
@testable import PostgresStores
import Synchronization
import Testing
import IdentityPorts

/// What PostgreSQL brings that SQLite's single writer does not (issue 24): several identity
/// instances writing the change log at once, and commits made by another instance.
@Suite("Identity: change log on PostgreSQL under several instances")
struct PostgresChangeLogTests {
    static func anonymous() -> UserRecord { UserRecord(id: .random(), email: nil, isAnonymous: true, createdAt: t0) }

    @Test("two instances writing at once: seq is 1…N without a gap and in commit order (a tailer reading while they write never skips one); every change is present")
    func gapFreeInCommitOrder() async throws {
        let (a, b, cleanup) = try await twoPostgresStores()
        defer { cleanup() }
        let users = (0..<8).map { _ in Self.anonymous() }
        for user in users { try await a.insert(user) }
        let writing = Mutex(true)
        // Reads the changes after the last one it saw, as the publisher does, while the writes run.
        let tail = Task { () throws -> [UInt64] in
            var seen: [UInt64] = []
            while true {
                let done = !writing.withLock { $0 }
                let batch = try await b.changes(after: seen.last ?? 0, limit: 1000)
                seen += batch.map(\.seq)
                if done && batch.isEmpty { return seen }
            }
        }
        var names: Set<String> = []
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (s, store) in [a, b].enumerated() {
                for w in 0..<4 {
                    for n in 0..<25 { names.insert("s\(s)-w\(w)-\(n)") }
                    group.addTask {
                        for n in 0..<25 {
                            let user = users[(w * 3 + n + s) % users.count]
                            _ = try await store.update(id: user.id, expectedVersion: nil, now: t0) { $0.displayName = "s\(s)-w\(w)-\(n)" }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        writing.withLock { $0 = false }
        let seen = try await tail.value
        #expect(seen == Array(1...200))
        let log = try await a.listChanges(afterSeq: 0, limit: 1000)
        #expect(log.head == 200 && log.changes.map(\.seq) == Array(1...200))
        #expect(Set(log.changes.compactMap { $0.user?.displayName }) == names)
        #expect(log.changes.allSatisfy { $0.kinds == ["profile"] })
        #expect(try await b.changeLogHead() == 200)
        // Each user's newest change is its stored state.
        for user in users {
            let stored = try #require(try await b.user(id: user.id))
            #expect(log.changes.last { $0.userID == user.id.rawValue }?.user == User(stored))
        }
    }

    @Test("a commit on instance B wakes instance A's observer (LISTEN/NOTIFY); a stamp that records no change does not; after its connection is killed A listens again and says so once; a dropped token stops it")
    func commitsOfAnotherInstance() async throws {
        let (a, b, cleanup) = try await twoPostgresStores()
        defer { cleanup() }
        let fired = Mutex(0)
        var token: AnyObject? = a.observeChangeCommits { fired.withLock { $0 += 1 } }
        // Once when the listening starts.
        try await waitUntil("A listening") { fired.withLock { $0 } == 1 }
        let user = Self.anonymous()
        try await b.insert(user)  // not a change
        _ = try await b.update(id: user.id, expectedVersion: nil, now: t0) { $0.displayName = "from B" }
        try await waitUntil("A told of B's commit") { fired.withLock { $0 } >= 2 }
        let afterChange = fired.withLock { $0 }
        try await b.recordSignIn(id: user.id, at: t0, newPasswordHash: nil, replacing: nil)
        try await Task.sleep(for: .milliseconds(300))
        #expect(fired.withLock { $0 } == afterChange)

        // Kill A's listening connection from B: A connects again, listens, and fires once.
        let killed = try await b.client.withConnection { connection in
            var killed = 0
            for try await ok in try await connection.query(
                """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()
                """, logger: b.queryLogger
            ).decode(Bool.self) where ok {
                killed += 1
            }
            return killed
        }
        #expect(killed == 1)
        try await waitUntil("A listening again") { fired.withLock { $0 } == afterChange + 1 }
        _ = try await b.update(id: user.id, expectedVersion: nil, now: t0) { $0.displayName = "again" }
        try await waitUntil("A told of B's next commit") { fired.withLock { $0 } == afterChange + 2 }

        #expect(token != nil)
        token = nil
        try await Task.sleep(for: .milliseconds(200))
        let stopped = fired.withLock { $0 }
        _ = try await b.update(id: user.id, expectedVersion: nil, now: t0) { $0.displayName = "unheard" }
        try await Task.sleep(for: .milliseconds(300))
        #expect(fired.withLock { $0 } == stopped)
    }

    @Test("a deletion on one instance while the other prunes the user's changes by the cap: no watermark of the deleted user stays behind")
    func capPruneBesideDeletion() async throws {
        let (a, b, cleanup) = try await twoPostgresStores()
        defer { cleanup() }
        var victims: [UserRecord] = []
        for _ in 0..<6 {
            let user = Self.anonymous()
            try await a.insert(user)
            for n in 0..<6 { _ = try await a.update(id: user.id, expectedVersion: nil, now: t0) { $0.displayName = "n\(n)" } }
            victims.append(user)
        }
        async let pruned = a.pruneChanges(before: .distantPast, maxPerUser: 2, batch: 100)
        for user in victims { try await b.delete(id: user.id) }
        _ = try await pruned
        let log = try await b.listChanges(afterSeq: 0, limit: 1000)
        #expect(log.changes.map(\.kinds) == Array(repeating: ["deleted"], count: 6))
        #expect(log.resyncUserIDs.isEmpty)
    }
}
