import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import PostgresStores
import Testing

/// `PostgresUserStore.copy` (`gatehouse store copy`, issue 24 §1) on its own: a real-sized copy,
/// and a target that already holds identity data.
@Suite("Identity store copy into PostgreSQL")
struct IdentityStoreCopyTests {
    @Test("7,000 users with email copy in one transaction (past PostgreSQL's lock slots for per-address locks); each sampled sign-in reads back")
    func largeCopy() async throws {
        let dir = try TemporaryDirectory(prefix: "copy-large")
        defer { dir.remove() }
        let sqlite = try await dir.migratedStore()
        let users = try (0..<7000).map { try makeUser("copy-\($0)@example.com") }
        try sqlite.insertManySync(users)
        let (store, stop) = try await StoreKind.postgresStore()
        defer { stop() }
        let report = try await store.copy(from: try SQLiteUserStore.CopySource(path: dir.databasePath)) { true }
        #expect(report.rows["users"] == 7000)
        #expect(report.sampled == 100)
        #expect(try await store.count() == 7000)
        // The reservation trigger is on again: a taken address stays refused.
        await expectCode(.emailExists) { try await store.insert(try makeUser("copy-5@example.com")) }
    }

    @Test("a target holding identity data (an admin key, no users) is refused and nothing changes")
    func refusesHeldTarget() async throws {
        let dir = try TemporaryDirectory(prefix: "copy-held")
        defer { dir.remove() }
        let sqlite = try await dir.migratedStore()
        try await sqlite.insert(try makeUser("held@example.com"))
        let (store, stop) = try await StoreKind.postgresStore()
        defer { stop() }
        _ = try await store.createAdminKey(name: "made first", scopes: ["audit"], now: t0)
        let source = try SQLiteUserStore.CopySource(path: dir.databasePath)
        #expect(try await store.holdsCopyTarget(tables: try source.tables()) == "admin_keys")
        do {
            _ = try await store.copy(from: source) { true }
            Issue.record("a copy into a database holding an admin key was made")
        } catch let error as IdentityCopyError {
            #expect(error.description.contains("already holds identity data (admin_keys)"), "\(error)")
        }
        #expect(try await store.adminKeys().count == 1)
        #expect(try await store.count() == 0)
    }
}
