import Foundation
@testable import SQLiteStores
import IdentityPorts
import GRDB
import GatehouseTestSupport
import IdentityCore
import Testing
@testable import IdentityService

/// The provider identities in the stores that keep everything (issue 20; PostgreSQL: issue 24):
/// SQLite's migrations 0013 and 0014, a user created with its identity, link and unlink, and
/// Apple tokens queued for revocation, on SQLite and PostgreSQL.
@Suite struct ProviderStoreTests {
    /// A migrated store of `kind` (one that keeps everything) and what removes it.
    func keptStore(_ kind: StoreKind) async throws -> (any IdentityStorage, @Sendable () -> Void) {
        let (store, cleanup) = try await kind.make()
        return (store, cleanup)
    }

    @Test("migration 0013 rebuilds users keeping every row, its identities (nothing cascades), indexes and triggers")
    func migrationKeepsData() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let queue = try DatabaseQueue(path: dir.databasePath)
        try SQLiteUserStore.migrator.migrate(queue, upTo: "0012-admin-keys")
        let user = try makeUser("kept@example.com")
        let schemaBefore = try await queue.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE tbl_name = 'users' AND type IN ('index', 'trigger') ORDER BY name")
        }
        try await queue.write { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            try db.execute(sql: legacyInsertUserSQL, arguments: SQLiteUserStore.arguments(user))
            try db.execute(
                sql: "INSERT INTO identities (provider, subject, userId, createdAt) VALUES ('google.com', 'g-1', ?, 0)", arguments: [user.id.rawValue])
        }
        try queue.close()

        let store = try await dir.migratedStore()
        #expect(try await store.user(id: user.id)?.email == "kept@example.com")
        #expect(try await store.userID(provider: "google.com", subject: "g-1") == user.id)
        let schemaAfter = try await store.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE tbl_name = 'users' AND type IN ('index', 'trigger') ORDER BY name")
        }
        #expect(Set(schemaBefore).isSubset(of: Set(schemaAfter)))
        #expect(schemaAfter.contains("users_change_log_update"))
        // The change-log trigger still fires.
        let head = try await store.read { db in try SQLiteUserStore.changeLogHead(db) }
        _ = try await store.update(id: user.id, expectedVersion: nil, now: t0) { $0.displayName = "Kept" }
        #expect(try await store.read { db in try SQLiteUserStore.changeLogHead(db) } == head + 1)
    }

    @Test("a user without email needs a linked provider; insert with an identity, link and unlink keep providers and refuse what they must", arguments: StoreKind.kept)
    func linkAndUnlink(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await keptStore(kind)
        defer { cleanup() }
        let bare = UserRecord(id: .random(), email: nil, createdAt: t0)
        await #expect(throws: IdentityError.self) { try await store.insert(bare) }
        let provider = try await store.insert(bare, identity: "oidc.corp", subject: "c-1")
        #expect(try await store.user(id: provider.id)?.providers == ["oidc.corp"])
        await #expect(throws: IdentityError.lastSignInMethod) { _ = try await store.unlink(provider: "oidc.corp", from: provider.id, now: t0) }
        #expect(try await store.userID(provider: "oidc.corp", subject: "c-1") == provider.id, "a refused unlink changes nothing")

        let owner = try makeUser("owner@example.com")
        try await store.insert(owner)
        await #expect(throws: IdentityError.credentialAlreadyInUse) {
            _ = try await store.link(provider: "oidc.corp", subject: "c-1", to: owner.id, now: t0) { _ in }
        }
        let linked = try await store.link(provider: "google.com", subject: "g-9", to: owner.id, now: t0) { _ in }
        #expect(linked.providers == ["google.com", "password"])
        #expect(linked.version == owner.version + 1)
        await #expect(throws: IdentityError.providerAlreadyLinked) {
            _ = try await store.link(provider: "google.com", subject: "g-10", to: owner.id, now: t0) { _ in }
        }
        await #expect(throws: IdentityError.providerNotLinked) { _ = try await store.unlink(provider: "apple.com", from: owner.id, now: t0) }
        let unlinked = try await store.unlink(provider: "google.com", from: owner.id, now: t0)
        #expect(unlinked.providers == ["password"])
        #expect(try await store.userID(provider: "google.com", subject: "g-9") == nil)
    }

    @Test("an Apple token is queued for revocation when its user is deleted and when the identity is unlinked; a newer one replaces it unrevoked and drops a revocation queued for the identity; never kept for an identity that is not the user's", arguments: StoreKind.kept)
    func appleTokensAreQueued(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await keptStore(kind)
        defer { cleanup() }
        let a = try await store.insert(UserRecord(id: .random(), email: nil, createdAt: t0), identity: "apple.com", subject: "a-1")
        #expect(try await store.storeAppleToken(user: a.id, subject: "a-1", clientID: "app", sealed: Data([1]), at: t0))
        #expect(try await !store.storeAppleToken(user: a.id, subject: "a-other", clientID: "app", sealed: Data([2]), at: t0))
        #expect(try await store.storeAppleToken(user: a.id, subject: "a-1", clientID: "app", sealed: Data([3]), at: t0))
        #expect(try await store.probes.pendingAppleRevocationCount() == 0, "the replaced token is not revoked")
        try await store.delete(id: a.id)
        #expect(try await store.probes.appleTokenCount() == 0)
        #expect(try await store.probes.pendingAppleRevocationCount() == 1)
        let due = try await store.dueAppleRevocations(now: Date(), limit: 10)
        #expect(due.map(\.sealedToken) == [Data([3])])
        #expect(due.last?.associatedData == PendingAppleRevocation.associatedData(user: a.id, subject: "a-1"))

        let b = try makeUser("b@example.com")
        try await store.insert(b)
        _ = try await store.link(provider: "apple.com", subject: "a-2", to: b.id, now: t0) { _ in }
        #expect(try await store.storeAppleToken(user: b.id, subject: "a-2", clientID: "app", sealed: Data([4]), at: t0))
        _ = try await store.unlink(provider: "apple.com", from: b.id, now: t0)
        #expect(try await store.probes.pendingAppleRevocationCount() == 2)
        // Linked again before the worker ran: the queued revocation goes with the new token.
        _ = try await store.link(provider: "apple.com", subject: "a-2", to: b.id, now: t0) { _ in }
        #expect(try await store.storeAppleToken(user: b.id, subject: "a-2", clientID: "app", sealed: Data([5]), at: t0))
        #expect(try await store.probes.pendingAppleRevocationCount() == 1)
        _ = try await store.unlink(provider: "apple.com", from: b.id, now: t0)
        #expect(try await store.probes.pendingAppleRevocationCount() == 2)
        // The Apple account linked again, to another user: the revocation queued for it goes
        // (revoking would end the new user's authorisation too).
        let c = try await store.insert(UserRecord(id: .random(), email: nil, createdAt: t0), identity: "apple.com", subject: "a-1")
        #expect(try await store.probes.pendingAppleRevocationCount() == 1, "a-1's queued revocation dropped by the link")
        #expect(try await store.claimAppleRevocation(id: due[0].id, now: Date(), until: Date() + 60) == false, "gone: not claimed")
        _ = c
        for item in due { try await store.finishAppleRevocation(id: item.id) }
        let left = try #require(try await store.dueAppleRevocations(now: Date(), limit: 10).first)
        try await store.retryAppleRevocation(id: left.id, at: Date() + 60)
        #expect(try await store.dueAppleRevocations(now: Date(), limit: 10).isEmpty)
        #expect(try await store.dueAppleRevocations(now: Date() + 61, limit: 10).first?.attempts == 1)
    }
}
