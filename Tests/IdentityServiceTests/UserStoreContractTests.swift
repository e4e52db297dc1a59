import GatehouseContracts
import GatehouseTestSupport
import Foundation
@testable import SQLiteStores
import IdentityPorts
import IdentityCore
import IdentityService
import SQLiteSupport
import Testing

/// One contract, run against every `UserStore` implementation: in memory, SQLite and PostgreSQL.
@Suite struct UserStoreContractTests {
    @Test(arguments: UserStoreKind.allCases)
    func insertAndFindByIDAndEmail(_ kind: UserStoreKind) async throws {
        let (store, cleanup) = try await kind.make()
        defer { cleanup() }
        var user = try makeUser("Alice@Example.com")
        user.displayName = "Alice"
        user.customClaimsJSON = #"{"role":"admin"}"#
        user.settingsJSON = #"{"theme":"dark"}"#
        user.tokensValidAfter = t0.addingTimeInterval(5)
        try await store.insert(user)
        #expect(try await store.user(id: user.id) == user)
        #expect(try await store.user(normalizedEmail: "alice@example.com") == user)
        #expect(try await store.user(normalizedEmail: "Alice@Example.com") == nil)
        #expect(try await store.user(id: UserID.random()) == nil)
        #expect(try await store.count() == 1)
    }

    @Test(arguments: UserStoreKind.allCases)
    func normalizedEmailIsUnique(_ kind: UserStoreKind) async throws {
        let (store, cleanup) = try await kind.make()
        defer { cleanup() }
        try await store.insert(try makeUser("bob@example.com"))
        await expectCode(.emailExists) { try await store.insert(try makeUser("BOB@Example.COM")) }
        #expect(try await store.count() == 1)
    }

    @Test(arguments: UserStoreKind.allCases)
    func updateBumpsVersionAndChecksExpectedVersion(_ kind: UserStoreKind) async throws {
        let (store, cleanup) = try await kind.make()
        defer { cleanup() }
        let user = try makeUser("carol@example.com")
        try await store.insert(user)
        let later = t0.addingTimeInterval(60)
        let updated = try await store.update(id: user.id, expectedVersion: 1, now: later) { $0.displayName = "Carol" }
        #expect(updated.version == 2)
        #expect(updated.displayName == "Carol")
        #expect(updated.updatedAt == later)
        #expect(try await store.user(id: user.id) == updated)
        await expectCode(.versionConflict) {
            try await store.update(id: user.id, expectedVersion: 1, now: later) { $0.displayName = "Mallory" }
        }
        #expect(try await store.user(id: user.id)?.displayName == "Carol")
        let third = try await store.update(id: user.id, expectedVersion: nil, now: later) { $0.photoURL = "https://x.test/a.png" }
        #expect(third.version == 3)
        await expectCode(.userNotFound) { try await store.update(id: .random(), expectedVersion: nil, now: later) { _ in } }
    }

    @Test(arguments: UserStoreKind.allCases)
    func anErrorInsideTheChangeWritesNothing(_ kind: UserStoreKind) async throws {
        let (store, cleanup) = try await kind.make()
        defer { cleanup() }
        let user = try makeUser("dan@example.com")
        try await store.insert(user)
        await expectCode(.invalidArgument) {
            try await store.update(id: user.id, expectedVersion: nil, now: t0) { _ in
                throw IdentityError.invalidArgument(field: "x", reason: "y")
            }
        }
        #expect(try await store.user(id: user.id) == user)
    }

    @Test(arguments: UserStoreKind.allCases)
    func invariantsAreEnforcedByTheStore(_ kind: UserStoreKind) async throws {
        let (store, cleanup) = try await kind.make()
        defer { cleanup() }
        let user = try makeUser("erin@example.com")
        try await store.insert(user)
        let big = "{\"k\":\"" + String(repeating: "x", count: 17_000) + "\"}"
        await expectCode(.invalidArgument) {
            try await store.update(id: user.id, expectedVersion: nil, now: t0) { $0.settingsJSON = big }
        }
        await expectCode(.invalidArgument) {
            try await store.update(id: user.id, expectedVersion: nil, now: t0) { $0.settingsJSON = "[1,2]" }
        }
        await expectCode(.invalidArgument) {
            try await store.update(id: user.id, expectedVersion: nil, now: t0) {
                $0.customClaimsJSON = "{\"c\":\"" + String(repeating: "y", count: 1_000) + "\"}"
            }
        }
        await expectCode(.invalidArgument) {
            try await store.update(id: user.id, expectedVersion: nil, now: t0) { $0.displayName = String(repeating: "n", count: 257) }
        }
        var bad = try makeUser("frank@example.com")
        bad.emailNormalized = nil
        await expectCode(.invalidArgument) { try await store.insert(bad) }
        #expect(try await store.user(id: user.id) == user)
        #expect(try await store.count() == 1)
    }

    @Test(arguments: UserStoreKind.allCases)
    func recordSignInKeepsVersion(_ kind: UserStoreKind) async throws {
        let (store, cleanup) = try await kind.make()
        defer { cleanup() }
        let user = try makeUser("gina@example.com")
        try await store.insert(user)
        let at = t0.addingTimeInterval(3600)
        try await store.recordSignIn(id: user.id, at: at, newPasswordHash: nil, replacing: nil)
        var stored = try #require(try await store.user(id: user.id))
        #expect(stored.lastSignInAt == at)
        #expect(stored.passwordHash == user.passwordHash)
        #expect(stored.version == 1)
        // An upgrade replacing another hash than the stored one (the password changed meanwhile) writes none.
        try await store.recordSignIn(id: user.id, at: at, newPasswordHash: "$argon2id$v=19$m=1024,t=1,p=1$b2xk$aGFzaA", replacing: "$other")
        #expect(try await store.user(id: user.id)?.passwordHash == stored.passwordHash)
        try await store.recordSignIn(id: user.id, at: at, newPasswordHash: "$argon2id$v=19$m=1024,t=1,p=1$bmV3$aGFzaA", replacing: stored.passwordHash)
        stored = try #require(try await store.user(id: user.id))
        #expect(stored.passwordHash == "$argon2id$v=19$m=1024,t=1,p=1$bmV3$aGFzaA")
        await expectCode(.userNotFound) { try await store.recordSignIn(id: .random(), at: at, newPasswordHash: nil, replacing: nil) }
    }

    @Test(arguments: UserStoreKind.allCases)
    func deleteRemovesUserAndIdentities(_ kind: UserStoreKind) async throws {
        let (store, cleanup) = try await kind.make()
        defer { cleanup() }
        let user = try makeUser("hank@example.com")
        try await store.insert(user)
        try await store.linkIdentity(provider: "google", subject: "1234", to: user.id, at: t0)
        #expect(try await store.userID(provider: "google", subject: "1234") == user.id)
        await expectCode(.invalidArgument) { try await store.linkIdentity(provider: "google", subject: "1234", to: user.id, at: t0) }
        await expectCode(.userNotFound) { try await store.linkIdentity(provider: "github", subject: "1", to: .random(), at: t0) }
        // The user's row lists its linked providers (sorted, each once) beside its password.
        try await store.linkIdentity(provider: "apple.com", subject: "a1", to: user.id, at: t0)
        try await store.linkIdentity(provider: "google", subject: "5678", to: user.id, at: t0)
        let linked = try #require(try await store.user(id: user.id))
        #expect(linked.linkedProviders == ["apple.com", "google"])
        #expect(linked.providers == (linked.passwordHash == nil ? ["apple.com", "google"] : ["apple.com", "google", "password"]))
        try await store.delete(id: user.id)
        #expect(try await store.user(id: user.id) == nil)
        #expect(try await store.user(normalizedEmail: "hank@example.com") == nil)
        #expect(try await store.userID(provider: "google", subject: "1234") == nil)
        await expectCode(.userNotFound) { try await store.delete(id: user.id) }
        // The email is free again.
        try await store.insert(try makeUser("hank@example.com"))
    }

    @Test(arguments: UserStoreKind.allCases)
    func sqlMetacharactersAreStoredLiterally(_ kind: UserStoreKind) async throws {
        let (store, cleanup) = try await kind.make()
        defer { cleanup() }
        var user = try makeUser("o'brien+x@example.com")
        user.displayName = "Robert'); DROP TABLE users;--"
        try await store.insert(user)
        #expect(try await store.user(normalizedEmail: "o'brien+x@example.com")?.displayName == user.displayName)
        #expect(try await store.user(normalizedEmail: "' OR '1'='1") == nil)
        #expect(try await store.count() == 1)
    }
}

@Suite struct SQLiteUserStoreTests {
    @Test func walForeignKeysAndSynchronousNormal() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await dir.migratedStore()
        #expect(try await store.pragma("journal_mode") == "wal")
        #expect(try await store.pragma("foreign_keys") == "1")
        #expect(try await store.pragma("synchronous") == "1")
        let full = try await SQLiteUserStore.open(path: dir.databasePath, durability: .powerLoss)
        #expect(try await full.pragma("synchronous") == "2")
    }

    @Test func migrationsAreNumberedAndIdempotent() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await dir.migratedStore()
        try await store.migrate()
        #expect(try await store.appliedMigrations() == ["0001-users-and-identities", "0002-user-providers", "0003-anonymous-sweep-index", "0004-outbox", "0006-password-resets", "0007-email-actions", "0008-email-reservations", "0009-change-log", "0010-change-log-cap-check", "0011-audit-log", "0012-admin-keys", "0013-provider-users", "0014-apple-tokens", "0015-snake-case-columns"])
    }

    @Test func withoutMigrateNothingWorksButNothingEscapes() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await SQLiteUserStore.open(path: dir.databasePath)
        do {
            _ = try await store.user(normalizedEmail: "a@example.com")
            Issue.record("expected a failure")
        } catch let error as IdentityError {
            #expect(error.code == .internal)
        }
    }

    @Test func dataSurvivesReopen() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let user = try makeUser("ivy@example.com")
        do {
            let store = try await dir.migratedStore()
            try await store.insert(user)
        }
        let reopened = try await SQLiteUserStore.open(path: dir.databasePath)
        try await reopened.migrate()
        #expect(try await reopened.user(id: user.id) == user)
    }

    @Test func concurrentSignUpsForOneEmailLeaveOneUser() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        let store = try await dir.migratedStore()
        let results = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<20 {
                group.addTask {
                    do {
                        try await store.insert(try makeUser(i % 2 == 0 ? "race@example.com" : "RACE@example.com"))
                        return true
                    } catch { return false }
                }
            }
            var ok = 0
            for await r in group where r { ok += 1 }
            return ok
        }
        #expect(results == 1)
        #expect(try await store.count() == 1)
    }
}
