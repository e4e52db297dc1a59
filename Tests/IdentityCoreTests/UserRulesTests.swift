import Foundation
import IdentityCore
import Testing

/// Linking and unlinking a provider identity, as tables: the state a store read, the refusal or
/// the writes. No store, no clock.
@Suite("Provider link rules")
struct ProviderLinkRulesTests {
    static let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    static func state(password: Bool, _ identities: [(String, String)]) -> UserState {
        var user = UserRecord(id: UserID("u1"), email: nil, passwordHash: password ? "$argon2id$x" : nil, createdAt: t0)
        user.linkedProviders = ProviderLinkRules.providers(of: identities.map { LinkedIdentity(provider: $0.0, subject: $0.1) })
        return UserState(user: user, identities: identities.map { LinkedIdentity(provider: $0.0, subject: $0.1) })
    }

    struct LinkCase: Sendable, CustomTestStringConvertible {
        var name: String
        var identities: [(String, String)]
        var link: (String, String)
        var refusal: IdentityError?
        var providers: [String]
        var testDescription: String { name }
    }

    static let linkCases: [LinkCase] = [
        .init(name: "nothing linked: linked", identities: [], link: ("google.com", "g-1"), refusal: nil, providers: ["google.com"]),
        .init(
            name: "another provider linked: both, in byte order", identities: [("oidc.corp", "c-1")], link: ("apple.com", "a-1"), refusal: nil,
            providers: ["apple.com", "oidc.corp"]),
        .init(
            name: "the same identity already the user's (a racing sign-in): in use", identities: [("google.com", "g-1")],
            link: ("google.com", "g-1"), refusal: .credentialAlreadyInUse, providers: []),
        .init(
            name: "another identity of the provider: already linked", identities: [("google.com", "g-1")], link: ("google.com", "g-2"),
            refusal: .providerAlreadyLinked, providers: []),
        .init(
            name: "byte order, not locale order: upper case first", identities: [("oidc.b", "1")], link: ("oidc.B", "2"), refusal: nil,
            providers: ["oidc.B", "oidc.b"]),
    ]

    @Test("link", arguments: linkCases)
    func link(_ c: LinkCase) throws {
        let state = Self.state(password: true, c.identities)
        let identity = LinkedIdentity(provider: c.link.0, subject: c.link.1)
        if let refusal = c.refusal {
            #expect(throws: refusal) { try ProviderLinkRules.link(state, identity) { _ in } }
            return
        }
        let writes = try ProviderLinkRules.link(state, identity) { $0.displayName = "Ada" }
        #expect(writes.linkIdentity == identity)
        #expect(writes.unlinkProvider == nil)
        #expect(writes.user?.linkedProviders == c.providers)
        #expect(writes.user?.displayName == "Ada", "the caller's change is applied to the written row")
        #expect(writes.user?.version == state.user.version, "the store moves the version, not the decision")
    }

    @Test("a change that throws refuses the link: nothing to write")
    func changeThrows() {
        #expect(throws: IdentityError.userDisabled) {
            try ProviderLinkRules.link(Self.state(password: true, []), LinkedIdentity(provider: "google.com", subject: "g")) { _ in
                throw IdentityError.userDisabled
            }
        }
    }

    struct UnlinkCase: Sendable, CustomTestStringConvertible {
        var name: String
        var password: Bool
        var identities: [(String, String)]
        var unlink: String
        var refusal: IdentityError?
        var providers: [String]
        var testDescription: String { name }
    }

    static let unlinkCases: [UnlinkCase] = [
        .init(name: "with a password: unlinked", password: true, identities: [("google.com", "g")], unlink: "google.com", refusal: nil, providers: []),
        .init(
            name: "another provider left: unlinked", password: false, identities: [("apple.com", "a"), ("google.com", "g")], unlink: "google.com",
            refusal: nil, providers: ["apple.com"]),
        .init(
            name: "the only way in: refused", password: false, identities: [("oidc.corp", "c")], unlink: "oidc.corp", refusal: .lastSignInMethod,
            providers: []),
        .init(
            name: "two identities of the provider, nothing else: refused", password: false, identities: [("oidc.corp", "c1"), ("oidc.corp", "c2")],
            unlink: "oidc.corp", refusal: .lastSignInMethod, providers: []),
        .init(name: "not linked", password: true, identities: [("apple.com", "a")], unlink: "google.com", refusal: .providerNotLinked, providers: []),
        .init(name: "nothing linked", password: true, identities: [], unlink: "google.com", refusal: .providerNotLinked, providers: []),
    ]

    @Test("unlink", arguments: unlinkCases)
    func unlink(_ c: UnlinkCase) throws {
        let state = Self.state(password: c.password, c.identities)
        if let refusal = c.refusal {
            #expect(throws: refusal) { try ProviderLinkRules.unlink(state, provider: c.unlink) }
            return
        }
        let writes = try ProviderLinkRules.unlink(state, provider: c.unlink)
        #expect(writes.unlinkProvider == c.unlink)
        #expect(writes.linkIdentity == nil)
        #expect(writes.user?.linkedProviders == c.providers)
    }
}

/// The import's step per item and which refusals end a batch, as tables.
@Suite("Import rules")
struct ImportRulesTests {
    @Test("no match: insert; a match: update with update, else skip")
    func steps() {
        let id = UserID("u1")
        #expect(ImportRules.step(matched: nil, update: false) == .insert)
        #expect(ImportRules.step(matched: nil, update: true) == .insert)
        #expect(ImportRules.step(matched: id, update: true) == .update(id))
        #expect(ImportRules.step(matched: id, update: false) == .skip(id))
    }

    @Test("an imported identity: linked when free, kept when the user has it, refused when another user holds it or the user has another of the provider")
    func identities() throws {
        let ada = UserID("ada"), bob = UserID("bob")
        #expect(try ImportRules.linksIdentity(subject: "g1", of: ada, holder: nil, subjectsOfProvider: []))
        #expect(try !ImportRules.linksIdentity(subject: "g1", of: ada, holder: ada, subjectsOfProvider: ["g1"]))
        #expect(throws: IdentityError.credentialAlreadyInUse) { try ImportRules.linksIdentity(subject: "g1", of: ada, holder: bob, subjectsOfProvider: []) }
        #expect(throws: IdentityError.providerAlreadyLinked) { try ImportRules.linksIdentity(subject: "g2", of: ada, holder: nil, subjectsOfProvider: ["g1"]) }
    }

    @Test("an outage ends the batch; an item's own refusal does not")
    func endsBatch() {
        #expect(ImportRules.endsBatch(.unavailable(cause: "database down")))
        #expect(ImportRules.endsBatch(.storage(cause: "disk")))
        #expect(!ImportRules.endsBatch(.emailExists))
        #expect(!ImportRules.endsBatch(.invalidArgument(field: "email", reason: "x")))
    }
}
