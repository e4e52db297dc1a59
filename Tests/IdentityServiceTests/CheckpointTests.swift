import GatehouseTestSupport
import Foundation
@testable import SQLiteStores
import IdentityCore
import SQLiteSupport
import Testing

@testable import IdentityService

/// The WAL is checkpointed by the store's own thread, not inside commits.
@Suite struct CheckpointTests {
    @Test func commitsDoNotCheckpointAndTheCheckpointerKeepsTheWALSmall() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await dir.migratedStore()
        #expect(try await store.pragma("wal_autocheckpoint") == "0")
        #expect(try await store.pragma("journal_mode") == "wal")
        // 1,500 single-row transactions: well past the 1,000 pages an automatic checkpoint waits for.
        for i in 0..<1_500 { try store.insertSync(try makeUser("wal\(i)@example.com")) }
        try await waitUntil("the store's checkpointer copied frames") { store.checkpointer.counts.frames > 0 }
        #expect(store.checkpointer.counts.checkpoints > 0)
        #expect(store.checkpointer.counts.frames > 0)
        // Every row is there, read through the pool after the checkpoints.
        #expect(try await store.count() == 1_500)
        #expect(try await store.user(normalizedEmail: "wal1499@example.com") != nil)
    }

    @Test func stoppingIsIdempotentAndTheStoreStillWorks() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await dir.migratedStore()
        store.checkpointer.stop()
        store.checkpointer.stop()
        try await store.insert(try makeUser("after-stop@example.com"))
        #expect(try await store.user(normalizedEmail: "after-stop@example.com") != nil)
    }

    @Test func aGrowingWALIsStartedOver() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await dir.migratedStore()
        store.checkpointer.stop()
        let checkpointer = try WALCheckpointer(path: dir.databasePath, interval: .milliseconds(5), restartFrames: 50)
        for i in 0..<1_500 {
            try store.insertSync(try makeUser("restart\(i)@example.com"))
            if i % 100 == 99 {
                // A pause in the writes, until the checkpointer has copied what they added.
                let before = checkpointer.counts.checkpoints
                try await waitUntil("a checkpoint after insert \(i)") { checkpointer.counts.checkpoints > before }
            }
        }
        try await waitUntil("a WAL restart") { checkpointer.counts.restarts > 0 }
        #expect(checkpointer.counts.restarts > 0)
        // Without restarts the WAL would hold every frame of the 1,500 commits (over 6 MB).
        let wal = try FileManager.default.attributesOfItem(atPath: dir.databasePath + "-wal")[.size] as? Int ?? 0
        #expect(wal < 3_000_000, "WAL is \(wal) bytes")
        checkpointer.stop()
        #expect(try await store.count() == 1_500)
    }
}
