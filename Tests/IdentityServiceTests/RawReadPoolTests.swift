import GatehouseTestSupport
import Foundation
import GRDB
import IdentityCore
import SQLiteSupport
import Testing

@testable import IdentityService
import SQLiteStores

/// Point reads on connections of their own see every committed write, from many threads at once.
@Suite struct RawReadPoolTests {
    @Test func readsSeeCommittedWritesWhileOthersWrite() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await dir.migratedStore()
        // Writers and readers at once: every user read back right after its insert committed.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    for i in 0..<100 {
                        let user = try makeUser("w\(writer)-\(i)@example.com")
                        try await store.insert(user)
                        #expect(try store.userNow(id: user.id)?.emailNormalized == user.emailNormalized)
                        #expect(try store.userNow(normalizedEmail: user.emailNormalized!)?.id == user.id)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await store.count() == 400)
        #expect(try store.userNow(normalizedEmail: "nobody@example.com") == nil)
    }

    @Test func nullsEmptyStringsAndBlobs() throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let queue = try DatabaseQueue(path: dir.databasePath)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "CREATE TABLE t (k TEXT PRIMARY KEY, s TEXT, n INTEGER, b BLOB)")
            try db.execute(sql: "INSERT INTO t VALUES ('a', NULL, NULL, NULL), ('', '', 0, x''), ('c', 'é', 7, x'0102')")
        }
        let pool = RawReadPool(path: dir.databasePath, maxIdle: 1)
        func row(_ key: String) throws -> (String?, Int64?, [UInt8])? {
            try pool.read(sql: "SELECT s, n, b FROM t WHERE k = ?", arguments: [.text(key)]) { ($0.optionalString(0), $0.optionalInt64(1), $0.bytes(2)) }
        }
        #expect(try row("a").map { $0.0 == nil && $0.1 == nil && $0.2 == [] } == true)
        #expect(try row("").map { $0.0 == "" && $0.1 == 0 && $0.2 == [] } == true)
        #expect(try row("c").map { $0.0 == "é" && $0.1 == 7 && $0.2 == [1, 2] } == true)
        #expect(try row("missing") == nil)
        let byBlob = try pool.read(sql: "SELECT k FROM t WHERE b = ?", arguments: [.blob([1, 2])]) { $0.string(0) }
        #expect(byBlob == "c")
        #expect(throws: DatabaseError.self) {
            _ = try pool.read(sql: "SELECT nope FROM t", arguments: []) { $0.string(0) }
        }
        // The pool is usable again after an error.
        #expect(try row("c") != nil)
    }
}
