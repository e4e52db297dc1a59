import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import Logging
import PostgresNIO
import PostgresStores
import PostgresSupport
import RPCRouting
import Testing

/// The admin part of the stores that keep everything (issue 22 §1; PostgreSQL: issue 24): admin
/// keys and the filtered listing of users, on SQLite and PostgreSQL.
@Suite struct AdminStoreTests {
    /// A migrated store of `kind` (one that keeps everything) and what removes it.
    func keptStore(_ kind: StoreKind) async throws -> (any IdentityStorage, @Sendable () -> Void) {
        let (store, cleanup) = try await kind.make()
        return (store, cleanup)
    }

    @Test("admin keys: made with checked names and scopes, the secret's hash kept, listed oldest first, touched, revoked once", arguments: StoreKind.kept)
    func adminKeys(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await keptStore(kind)
        defer { cleanup() }
        for (name, scopes) in [("  ", ["all"]), (String(repeating: "é", count: 33), ["all"]), ("a\u{7}b", ["all"]), ("ops", []), ("ops", ["nope"])] {
            await expectCode(.invalidArgument) { try await store.createAdminKey(name: name, scopes: scopes, now: t0) }
        }
        let made = try await store.createAdminKey(name: " ops ", scopes: ["all"], now: t0)
        #expect(made.key.name == "ops" && made.key.id.count == 16 && made.key.scopes == AdminKey.Scope.all.sorted())
        #expect(made.token.hasPrefix("gha_\(made.key.id).") && made.token.utf8.count == 64)
        let reader = try await store.createAdminKey(
            name: "reader", scopes: [AdminKey.Scope.usersRead, AdminKey.Scope.usersRead], now: t0 + 1)
        #expect(reader.key.scopes == [AdminKey.Scope.usersRead])
        #expect(try await store.adminKeys() == [made.key, reader.key])

        let (active, hash) = try #require(try await store.activeAdminKey(id: made.key.id))
        #expect(active == made.key)
        #expect(hash == IdentityHandlers.resetCodeHash(String(made.token.dropFirst("gha_".count + 17))))
        #expect(try await store.activeAdminKey(id: "unknown-key-0000") == nil)
        try await store.touchAdminKey(id: made.key.id, at: t0 + 120)
        #expect(try await store.adminKeys().first?.lastUsedAt == t0 + 120)

        let revoked = try await store.revokeAdminKey(id: made.key.id, at: t0 + 200)
        #expect(revoked.revokedAt == t0 + 200)
        #expect(try await store.revokeAdminKey(id: made.key.id, at: t0 + 300).revokedAt == t0 + 200, "the first revocation's time stays")
        #expect(try await store.activeAdminKey(id: made.key.id) == nil)
        await expectCode(.adminKeyNotFound) { try await store.revokeAdminKey(id: "unknown-key-0000", at: t0) }
        // The table's invariants hold whoever writes: a 16-character id, a 32-byte hash.
        await expectCode(.invalidArgument) {
            try await store.insertAdminKey(AdminKey(id: "short", name: "x", scopes: ["audit"], createdAt: t0), secretHash: Data(count: 32))
        }
        await expectCode(.invalidArgument) {
            try await store.insertAdminKey(AdminKey(id: "sixteen-chars-00", name: "x", scopes: ["audit"], createdAt: t0), secretHash: Data(count: 31))
        }
        #expect(try await store.adminKeys().count == 2)
    }

    @Test("a key made through the service authenticates with its token, not with another secret, and no longer once revoked", arguments: StoreKind.kept)
    func adminKeyAuthentication(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let made = try await h.caller.call(IdentityAPI.createAdminKey, CreateAdminKeyRequest(name: "ops", scopes: ["audit"]))
        #expect(try await h.caller.call(IdentityAPI.authenticateAdminKey, AuthenticateAdminKeyRequest(token: made.token)) .id == made.key.id)
        let forged = String(made.token.dropLast()) + (made.token.last == "A" ? "B" : "A")
        await expectCode(.invalidAdminKey) { try await h.caller.call(IdentityAPI.authenticateAdminKey, AuthenticateAdminKeyRequest(token: forged)) }
        _ = try await h.caller.call(IdentityAPI.revokeAdminKey, AdminKeyIDRequest(id: made.key.id))
        await expectCode(.invalidAdminKey) { try await h.caller.call(IdentityAPI.authenticateAdminKey, AuthenticateAdminKeyRequest(token: made.token)) }
    }

    @Test("listing and export: id order is byte order (as SQLite's), every filter, pages with a cursor", arguments: StoreKind.kept)
    func listingFiltersAndPages(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await keptStore(kind)
        defer { cleanup() }
        // Ids whose byte order differs from a language's collation ('-' < '0' < 'B' < '_' < 'a').
        func user(_ id: String, _ email: String?, at seconds: Double) -> UserRecord {
            var user = UserRecord(
                id: UserID(rawValue: id), email: try? email.map(EmailAddress.init), passwordHash: email == nil ? nil : "$2b$04$x",
                createdAt: t0 + seconds)
            user.isAnonymous = email == nil
            return user
        }
        try await store.insert(user("list-a-000000000000000001", "ann@example.com", at: 0))
        try await store.insert(user("list-B-000000000000000002", "anna@example.com", at: 10))
        try await store.insert(user("list_z-000000000000000003", "bob@example.com", at: 20))
        try await store.insert(user("list--0000000000000000004", nil, at: 30))
        var provided = user("list-0-000000000000000005", nil, at: 40)
        provided.isAnonymous = false  // a provider's user without an address
        _ = try await store.insert(provided, identity: "google.com", subject: "g-1")
        _ = try await store.update(id: UserID(rawValue: "list_z-000000000000000003"), expectedVersion: nil, now: t0) { $0.disabled = true }
        let byteOrder = [
            "list--0000000000000000004", "list-0-000000000000000005", "list-B-000000000000000002", "list-a-000000000000000001",
            "list_z-000000000000000003",
        ]
        func ids(_ filter: UserFilter, after: String = "", limit: Int = 100) async throws -> ([String], Bool) {
            let (users, more) = try await store.users(filter: filter, after: after, limit: limit)
            return (users.map(\.id.rawValue), more)
        }
        #expect(try await ids(UserFilter()) == (byteOrder, false))
        #expect(try await ids(UserFilter(), limit: 2) == (Array(byteOrder.prefix(2)), true))
        #expect(try await ids(UserFilter(), after: byteOrder[1], limit: 2) == (Array(byteOrder[2...3]), true))
        #expect(try await ids(UserFilter(), after: byteOrder[3], limit: 2) == ([byteOrder[4]], false))
        var filter = UserFilter()
        filter.emailPrefix = "ann"
        #expect(try await ids(filter).0 == ["list-B-000000000000000002", "list-a-000000000000000001"])
        filter = UserFilter()
        filter.provider = "google.com"
        #expect(try await ids(filter).0 == ["list-0-000000000000000005"])
        filter.provider = "google"
        #expect(try await ids(filter).0 == [], "a provider matches whole")
        filter.provider = "password"
        #expect(try await ids(filter).0 == ["list-B-000000000000000002", "list-a-000000000000000001", "list_z-000000000000000003"])
        filter = UserFilter()
        filter.disabled = true
        #expect(try await ids(filter).0 == ["list_z-000000000000000003"])
        filter.disabled = false
        filter.anonymous = true
        #expect(try await ids(filter).0 == ["list--0000000000000000004"])
        filter = UserFilter()
        filter.createdAfter = t0 + 10
        filter.createdBefore = t0 + 30
        #expect(try await ids(filter).0 == ["list-B-000000000000000002", "list_z-000000000000000003"])
        // Export pages the same order.
        #expect(try await store.users(after: "", limit: 3).map(\.id.rawValue) == Array(byteOrder.prefix(3)))
        #expect(try await store.users(after: byteOrder[2], limit: 3).map(\.id.rawValue) == Array(byteOrder[3...]))
    }
}

/// Races that PostgreSQL has and SQLite (one writer at a time) has not: two identity instances,
/// two `PostgresUserStore`s on their own clients over one database (issue 24).
@Suite struct AdminStoreRaceTests {
    /// Two migrated stores over one new database, each on a client of its own (`twoPostgresStores`).
    static func twoInstances() async throws -> (PostgresUserStore, PostgresUserStore, @Sendable () -> Void) {
        try await twoPostgresStores()
    }

    /// What `a` and `b` give when started together.
    static func together<T: Sendable>(
        _ a: @escaping @Sendable () async throws -> T, _ b: @escaping @Sendable () async throws -> T
    ) async -> [Result<T, any Error>] {
        async let x = outcome(a)
        async let y = outcome(b)
        return await [x, y]
    }

    static func outcome<T: Sendable>(_ body: @Sendable () async throws -> T) async -> Result<T, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    @Test("two instances creating a user with one new identity at once: exactly one user exists and owns it, the other is told credential_already_in_use")
    func concurrentInsertsOfOneIdentity() async throws {
        let (a, b, cleanup) = try await Self.twoInstances()
        defer { cleanup() }
        for round in 0..<12 {
            let subject = "race-\(round)"
            let results = await Self.together(
                { try await a.insert(UserRecord(id: .random(), email: nil, createdAt: t0), identity: "oidc.corp", subject: subject) },
                { try await b.insert(UserRecord(id: .random(), email: nil, createdAt: t0), identity: "oidc.corp", subject: subject) })
            let winners = results.compactMap { try? $0.get() }
            try #require(winners.count == 1, "round \(round): \(results)")
            for case .failure(let error) in results {
                #expect(error as? IdentityError == .credentialAlreadyInUse, "\(error)")
            }
            #expect(try await a.userID(provider: "oidc.corp", subject: subject) == winners[0].id)
            #expect(try await b.user(id: winners[0].id)?.linkedProviders == ["oidc.corp"])
            #expect(try await a.count() == round + 1, "the loser's user is not written")
        }
    }

    @Test("two instances linking two identities of one provider to one user at once: one links, the other is told provider_already_linked")
    func concurrentLinksToOneUser() async throws {
        let (a, b, cleanup) = try await Self.twoInstances()
        defer { cleanup() }
        for round in 0..<8 {
            let owner = try makeUser("owner\(round)@example.com")
            try await a.insert(owner)
            let results = await Self.together(
                { try await a.link(provider: "google.com", subject: "g-a-\(round)", to: owner.id, now: t0) { _ in } },
                { try await b.link(provider: "google.com", subject: "g-b-\(round)", to: owner.id, now: t0) { _ in } })
            let winners = results.compactMap { try? $0.get() }
            try #require(winners.count == 1, "round \(round): \(results)")
            for case .failure(let error) in results {
                #expect(error as? IdentityError == .providerAlreadyLinked, "\(error)")
            }
            #expect(try await a.subjects(provider: "google.com", of: owner.id).count == 1)
            #expect(try await b.user(id: owner.id)?.version == owner.version + 1)
        }
    }

    @Test("two instances unlinking a password-less user's two providers at once: one unlinks, the other is told last_sign_in_method")
    func concurrentUnlinksKeepASignInMethod() async throws {
        let (a, b, cleanup) = try await Self.twoInstances()
        defer { cleanup() }
        for round in 0..<8 {
            let user = try await a.insert(UserRecord(id: .random(), email: nil, createdAt: t0), identity: "google.com", subject: "g-\(round)")
            _ = try await a.link(provider: "apple.com", subject: "a-\(round)", to: user.id, now: t0) { _ in }
            let results = await Self.together(
                { try await a.unlink(provider: "google.com", from: user.id, now: t0) },
                { try await b.unlink(provider: "apple.com", from: user.id, now: t0) })
            try #require(results.compactMap { try? $0.get() }.count == 1, "round \(round): \(results)")
            for case .failure(let error) in results {
                #expect(error as? IdentityError == .lastSignInMethod, "\(error)")
            }
            let stored = try #require(try await b.user(id: user.id))
            #expect(stored.linkedProviders.count == 1)
            #expect(try await a.subjects(provider: stored.linkedProviders[0], of: user.id).count == 1, "providers as the identities are")
        }
    }

    @Test("an Apple token stored while another instance unlinks the identity is never kept: it is refused, or queued for revocation by the unlink")
    func appleTokenStoredDuringUnlink() async throws {
        let (a, b, cleanup) = try await Self.twoInstances()
        defer { cleanup() }
        for round in 0..<12 {
            let user = try makeUser("apple\(round)@example.com")
            try await a.insert(user)
            _ = try await a.link(provider: "apple.com", subject: "apple-\(round)", to: user.id, now: t0) { _ in }
            let results = await Self.together(
                { try await a.storeAppleToken(user: user.id, subject: "apple-\(round)", clientID: "app", sealed: Data([1]), at: t0) },
                {
                    _ = try await b.unlink(provider: "apple.com", from: user.id, now: t0)
                    return true
                })
            let stored = try results[0].get()
            _ = try results[1].get()
            #expect(try await a.probes.appleTokenCount() == 0, "round \(round): no token kept for an unlinked identity")
            let queued = try await b.dueAppleRevocations(now: Date(), limit: 10)
            #expect(queued.count == (stored ? 1 : 0), "round \(round): stored \(stored), queued \(queued.count)")
            for item in queued { try await b.finishAppleRevocation(id: item.id) }
        }
    }

    @Test("two instances claiming one Apple revocation at once: exactly one gets it")
    func concurrentClaimsOfOneRevocation() async throws {
        let (a, b, cleanup) = try await Self.twoInstances()
        defer { cleanup() }
        for round in 0..<12 {
            let user = try await a.insert(UserRecord(id: .random(), email: nil, createdAt: t0), identity: "apple.com", subject: "apple-\(round)")
            #expect(try await a.storeAppleToken(user: user.id, subject: "apple-\(round)", clientID: "app", sealed: Data([UInt8(round)]), at: t0))
            try await b.delete(id: user.id)
            let due = try #require(try await b.dueAppleRevocations(now: Date(), limit: 10).first)
            let now = Date()
            let results = await Self.together(
                { try await a.claimAppleRevocation(id: due.id, now: now, until: now + 60) },
                { try await b.claimAppleRevocation(id: due.id, now: now, until: now + 60) })
            #expect(try results.map { try $0.get() }.filter { $0 }.count == 1, "round \(round): \(results)")
            #expect(try await a.dueAppleRevocations(now: now, limit: 10).isEmpty, "claimed: not due before `until`")
            try await b.finishAppleRevocation(id: due.id)
            #expect(try await a.probes.pendingAppleRevocationCount() == 0)
        }
    }
}
