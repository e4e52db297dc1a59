import Foundation
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import RPCRouting
import Testing
import IdentityPorts

/// Bulk import and export (`identity.importUsers`, `identity.exportUsers`; issue 22 §5) against
/// the stores that keep everything: SQLite and PostgreSQL (issue 24).
@Suite struct ImportHandlersTests {
    /// Made by Python's `bcrypt.hashpw(b"old bcrypt passphrase", bcrypt.gensalt(4))`.
    static let bcryptHash = "$2b$04$AzTUpxHc9OS8jAz0KJzAG.AzmYKsCUwxwhKMEi5lnAojb4YNiEirK"
    static let bcryptPassword = "old bcrypt passphrase"

    func importing(_ h: Harness, _ users: [ImportedUser], mode: String = "skip") async throws -> [ImportResult] {
        try await h.caller.call(IdentityAPI.importUsers, ImportUsersRequest(users: users, mode: mode)).results
    }

    @Test("identities: linked at import so the provider's next sign-in finds the user, kept on a re-run, added by an update, refused (the item only) when another user holds one or the user has another of the provider, and exported", arguments: StoreKind.kept)
    func importLinksIdentities(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let google = ImportedIdentity(provider: "google.com", subject: "108234567890")
        let ada = ImportedUser(id: "firebase-local-id-0000000002", email: "ada@example.com", identities: [google])
        #expect(try await importing(h, [ada]).map(\.outcome) == ["created"])
        let id = UserID("firebase-local-id-0000000002")
        #expect(try await h.store.userID(provider: "google.com", subject: "108234567890") == id)
        #expect(try await h.store.user(id: id)?.linkedProviders == ["google.com"], "an identity's provider is listed")
        #expect(try await importing(h, [ada]).map(\.outcome) == ["skipped"])
        #expect(try await importing(h, [ada], mode: "update").map(\.outcome) == ["updated"], "its own identity again: kept")

        var more = ada
        more.identities = [google, ImportedIdentity(provider: "apple.com", subject: "001234.abcd")]
        #expect(try await importing(h, [more], mode: "update").map(\.outcome) == ["updated"])
        #expect(try await h.store.userID(provider: "apple.com", subject: "001234.abcd") == id)

        // Another user with ada's Google identity, and ada with a second Google identity: each
        // item is refused alone, and nothing of it is written.
        let thief = ImportedUser(email: "bob@example.com", identities: [google])
        var second = ada
        second.identities = [ImportedIdentity(provider: "google.com", subject: "999")]
        let fresh = ImportedUser(email: "cy@example.com", identities: [ImportedIdentity(provider: "oidc.corp", subject: "cy")])
        let refused = try await importing(h, [thief, second, fresh], mode: "update")
        #expect(refused.map(\.outcome) == ["failed", "failed", "created"])
        #expect(refused.map(\.errorCode) == ["credential_already_in_use", "provider_already_linked", ""])
        #expect(try await h.store.user(normalizedEmail: "bob@example.com") == nil, "the refused item's user was rolled back too")
        #expect(try await h.store.userID(provider: "google.com", subject: "999") == nil)
        #expect(try await h.store.userID(provider: "oidc.corp", subject: "cy") != nil)

        let twice = ImportedUser(email: "dee@example.com", identities: [google, ImportedIdentity(provider: "google.com", subject: "2")])
        let long = ImportedUser(email: "eve@example.com", identities: [ImportedIdentity(provider: "google.com", subject: String(repeating: "s", count: 256))])
        let control = ImportedUser(email: "fay@example.com", identities: [ImportedIdentity(provider: "google.com", subject: "a\u{0}b")])
        let badProvider = ImportedUser(email: "gus@example.com", identities: [ImportedIdentity(provider: "password", subject: "x")])
        let many = ImportedUser(email: "hal@example.com", identities: (0..<17).map { ImportedIdentity(provider: "oidc.p\($0)", subject: "x") })
        let bad = try await importing(h, [twice, long, control, badProvider, many])
        #expect(bad.map(\.errorCode) == Array(repeating: "invalid_argument", count: 5))
        #expect(bad.allSatisfy { $0.errorMessage.contains("identit") || $0.errorMessage.contains("provider") }, "\(bad.map(\.errorMessage))")

        let page = try await h.caller.call(IdentityAPI.exportUsers, ExportUsersRequest())
        let exported = try #require(page.users.first { $0.id == id.rawValue })
        #expect(exported.identities == [ImportedIdentity(provider: "apple.com", subject: "001234.abcd"), google])
        #expect(page.users.first { $0.email == "cy@example.com" }?.identities == [ImportedIdentity(provider: "oidc.corp", subject: "cy")])
    }

    @Test(arguments: StoreKind.kept)
    func importCreatesThenSkipsOrUpdatesMatches(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let argon = try PasswordHashing.argon2idHash(Array("old argon passphrase".utf8), parameters: .testing)
        let users = [
            ImportedUser(
                id: "firebase-local-id-0000000001", email: "Ada@Example.com", emailVerified: true, displayName: "Ada",
                passwordHash: argon, providers: ["google.com"], customClaimsJSON: #"{"tier":2}"#,
                createdAt: Date(timeIntervalSince1970: 1_600_000_000.5)),
            ImportedUser(email: "bob@example.com", passwordHash: Self.bcryptHash, disabled: true),
        ]
        let first = try await importing(h, users)
        #expect(first.map(\.outcome) == ["created", "created"])
        #expect(first[0].userID == "firebase-local-id-0000000001" && first[1].userID.count == 22)
        let ada = try #require(try await h.store.user(id: UserID("firebase-local-id-0000000001")))
        #expect(ada.email == "Ada@Example.com" && ada.emailNormalized == "ada@example.com" && ada.emailVerified)
        #expect(ada.passwordHash == argon && ada.linkedProviders == ["google.com"] && ada.customClaimsJSON == #"{"tier":2}"#)
        #expect(ada.createdAt == Date(timeIntervalSince1970: 1_600_000_000.5) && !ada.isAnonymous)
        #expect(try await h.store.user(normalizedEmail: "bob@example.com")?.disabled == true)

        // Again: every item matches (by id, else by email) and nothing changes.
        let again = try await importing(h, users)
        #expect(again.map(\.outcome) == ["skipped", "skipped"])
        #expect(again.map(\.userID) == first.map(\.userID))
        #expect(try await h.store.count() == 2)
        #expect(try await h.store.user(id: ada.id)?.version == ada.version)

        // Update mode brings the profile in, but never undoes what happened here since: an Argon2id
        // hash (set or rehashed in Gatehouse) stays, a verified address stays verified.
        var changed = users[0]
        changed.displayName = "Ada L."
        changed.passwordHash = "$2b$04$AzTUpxHc9OS8jAz0KJzAG.AzmYKsCUwxwhKMEi5lnAojb4YNiEirK"
        changed.emailVerified = false
        let updated = try await importing(h, [changed], mode: "update")
        #expect(updated.map(\.outcome) == ["updated"])
        let after = try #require(try await h.store.user(id: ada.id))
        #expect(after.displayName == "Ada L." && after.emailVerified && after.passwordHash == argon && after.version == ada.version + 1)
        #expect(try await h.store.count() == 2)
        #expect(h.tokens.revocations.isEmpty)

        // An update that disables a user revokes its sessions, as `setDisabled` does.
        changed.disabled = true
        #expect(try await importing(h, [changed], mode: "update").map(\.outcome) == ["updated"])
        #expect(h.tokens.revocations.map(\.userID) == [ada.id.rawValue])
        #expect(try await h.store.user(id: ada.id)?.disabled == true)
        // A later update never re-enables a disabled user.
        changed.disabled = false
        #expect(try await importing(h, [changed], mode: "update").map(\.outcome) == ["updated"])
        #expect(try await h.store.user(id: ada.id)?.disabled == true)
    }

    @Test(arguments: StoreKind.kept)
    func badItemsAreReportedAndTheOthersWritten(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        _ = try await importing(h, [ImportedUser(id: "taken-address-user-00001", email: "taken@example.com")])
        let results = try await importing(
            h,
            [
                ImportedUser(email: "not an email"),
                ImportedUser(email: "ok1@example.com", passwordHash: "md5$abc"),
                ImportedUser(email: "ok2@example.com", passwordHash: "$2b$31$AzTUpxHc9OS8jAz0KJzAG.AzmYKsCUwxwhKMEi5lnAojb4YNiEirK"),
                ImportedUser(email: "ok3@example.com", customClaimsJSON: #"{"sub":"x"}"#),
                ImportedUser(id: "short", email: "ok4@example.com"),
                ImportedUser(passwordHash: Self.bcryptHash),
                ImportedUser(email: "ok5@example.com", displayName: String(repeating: "n", count: 300)),
                ImportedUser(email: "ok6@example.com", providers: ["password"]),
                ImportedUser(email: "fine@example.com", passwordHash: Self.bcryptHash),
            ])
        #expect(results.map(\.outcome) == Array(repeating: "failed", count: 8) + ["created"])
        #expect(results.map(\.index) == Array(0..<9))
        #expect(results[0].errorCode == "invalid_email")
        #expect(results[1].errorCode == "invalid_argument" && results[1].errorMessage.contains("unknown hash format"))
        #expect(results[2].errorMessage.contains("bcrypt cost 31"))
        #expect(results[3].errorMessage.contains("`sub` is a reserved claim name"))
        #expect(results[5].errorMessage.contains("without an email address cannot sign in"))
        #expect(results.allSatisfy { !$0.errorMessage.contains("AzTUpxHc9OS8") })
        // Each batch is one audit event by the operator, its counts committed with it (issue 22 §3).
        do {
            let imported = try await h.caller.call(IdentityAPI.listAudit, ListAuditRequest()).events.filter { $0.kind == "users.imported" }
            #expect(imported.map(\.detailJSON) == [
                #"{"mode":"skip","created":1,"updated":0,"skipped":0,"failed":0}"#, #"{"mode":"skip","created":1,"updated":0,"skipped":0,"failed":8}"#,
            ])
            #expect(imported.allSatisfy { $0.actor == "operator" && !$0.detailJSON.contains("AzTUpxHc9OS8") })
        }
        // A user without an email at all (a phone-only or anonymous user elsewhere) is refused too.
        let emailless = try await importing(h, [ImportedUser(id: "phone-only-user-0000001")])
        #expect(emailless.map(\.outcome) == ["failed"] && emailless[0].errorMessage.contains("without an email address"))
        // A hash too short to be safe is refused at import.
        let short = try await importing(h, [ImportedUser(email: "short@example.com", passwordHash: "$scrypt$ln=4,r=8,p=1$c2FsdA$AAE")])
        #expect(short.map(\.outcome) == ["failed"] && short[0].errorMessage.contains("16 to 128 bytes"))
        #expect(try await h.store.count() == 2)

        // An update that moves a user onto an address another user has: email_exists, the rest written.
        let moved = try await importing(
            h,
            [
                ImportedUser(id: "moving-user-0000000000001", email: "first@example.com"),
                ImportedUser(id: "moving-user-0000000000001", email: "taken@example.com"),
                ImportedUser(email: "later@example.com"),
            ], mode: "update")
        #expect(moved.map(\.outcome) == ["created", "failed", "created"])
        #expect(moved[1].errorCode == "email_exists")
        #expect(try await h.store.user(id: UserID("moving-user-0000000000001"))?.email == "first@example.com")
    }

    @Test(arguments: StoreKind.kept)
    func anImportedBcryptUserSignsInWithItsOldPasswordAndGetsArgon2id(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let results = try await importing(h, [ImportedUser(email: "carol@example.com", passwordHash: Self.bcryptHash)])
        let id = UserID(results[0].userID)
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "carol@example.com", password: "wrong passphrase here"))
        }
        let signedIn = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "carol@example.com", password: Self.bcryptPassword))
        #expect(signedIn.user.id == id.rawValue)
        let stored = try #require(try await h.store.user(id: id)?.passwordHash)
        #expect(stored.hasPrefix("$argon2id$"))
        #expect(PasswordHashing.verify(Array(Self.bcryptPassword.utf8), against: stored))
    }

    @Test(arguments: StoreKind.kept)
    func exportPagesInIDOrderAndRoundTrips(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        var users: [ImportedUser] = []
        for n in 0..<5 {
            let providers: [String] = n == 0 ? ["apple.com", "google.com"] : []
            let claims: String? = n == 1 ? #"{"role":"admin"}"# : nil
            let created = Date(timeIntervalSince1970: 1_600_000_000 + Double(n))
            users.append(
                ImportedUser(
                    id: "export-user-000000000000\(4 - n)", email: "u\(n)@example.com", emailVerified: n % 2 == 0, displayName: "U\(n)",
                    photoURL: "https://example.com/\(n).png", passwordHash: Self.bcryptHash, providers: providers,
                    customClaimsJSON: claims, disabled: n == 3, createdAt: created))
        }
        _ = try await importing(h, users)
        var pages: [[ImportedUser]] = []
        var cursor = ""
        repeat {
            let page = try await h.caller.call(IdentityAPI.exportUsers, ExportUsersRequest(afterID: cursor, pageSize: 2, includeHashes: true))
            pages.append(page.users)
            cursor = page.nextAfterID
        } while !cursor.isEmpty && pages.count < 10
        #expect(pages.map(\.count) == [2, 2, 1])
        let exported = pages.flatMap { $0 }
        #expect(exported.map { $0.id } == Array(users.map { $0.id }.reversed()))
        #expect(Set(exported) == Set(users))
        let withoutHashes = try await h.caller.call(IdentityAPI.exportUsers, ExportUsersRequest())
        #expect(withoutHashes.users.count == 5 && withoutHashes.users.allSatisfy { $0.passwordHash == nil } && withoutHashes.nextAfterID == "")
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.exportUsers, ExportUsersRequest(pageSize: 1001)) }
    }

    @Test(arguments: StoreKind.kept)
    func wholeCallRefusalsAndCallers(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let many = (0...1000).map { ImportedUser(email: "m\($0)@example.com") }
        await expectCode(.invalidArgument) { try await importing(h, many) }
        await expectCode(.invalidArgument) { try await importing(h, [ImportedUser(email: "x@example.com")], mode: "replace") }
        #expect(try await h.store.count() == 0)
        #expect(IdentityAPI.importUsers.callers.isEmpty && IdentityAPI.exportUsers.callers.isEmpty)
    }
}
