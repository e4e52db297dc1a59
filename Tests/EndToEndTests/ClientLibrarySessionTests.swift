import Foundation
import GatehouseClient
import GatehouseTestSupport
import Testing

/// The client library's session keeping (refresh, the token store, a relaunch, an unreachable
/// server) and provider sign-in, against three processes (and the fake OpenID provider).
extension ClientLibraryTests {
    /// A temporary folder for a `FileTokenStore`, and the file in it.
    static func sessionFile() throws -> (directory: URL, file: URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gh-client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return (directory, directory.appendingPathComponent("session.json"))
    }

    /// The POSIX permission bits of the file at `url`.
    static func permissions(_ url: URL) throws -> Int {
        let value = try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions]
        return (value as? NSNumber)?.intValue ?? (value as? Int) ?? -1
    }

    @Test("with the server unreachable (a closed port): calls throw network errors (isNetworkError, with a sentence) and keep the session; signOut still signs out and empties the file store")
    func unreachableServer() async throws {
        let (directory, file) = try Self.sessionFile()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = FileTokenStore(url: file)
        // Whole seconds: the store keeps dates to the millisecond, as the server sends them.
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let user = User(id: "u-offline", email: "off@example.com", providers: ["password"], createdAt: now.addingTimeInterval(-86_400))
        let saved = StoredSession(accessToken: "a.b.c", refreshToken: "refresh", expiresAt: now.addingTimeInterval(600), user: user)
        try store.save(saved)
        let closed = "http://127.0.0.1:\(freeLoopbackPort())"
        let device = Self.client(closed, store: FileTokenStore(url: file))
        #expect(await device.currentState == .signedIn(user), "the saved session is restored")

        let reload = await Self.failure { try await device.reloadUser() }
        #expect(reload?.isNetworkError == true, "\(String(describing: reload))")
        #expect(reload?.code == nil)
        let signIn = await Self.failure { try await Self.client(closed).signIn(email: "off@example.com", password: Self.password) }
        #expect(signIn?.isNetworkError == true, "\(String(describing: signIn))")
        // An expired access token cannot be refreshed offline: a network error, the session kept.
        let clock = ClientClock()
        clock.advance(by: 3600)
        let late = Self.client(closed, store: FileTokenStore(url: file), clock: clock)
        #expect(await Self.failure { try await late.accessToken() }?.isNetworkError == true)
        #expect(await late.currentState == .signedIn(user))
        #expect(await device.currentState == .signedIn(user), "a network failure does not sign out")
        #expect(try store.load() == saved)

        await device.signOut()
        #expect(await device.currentState == .signedOut)
        #expect(try store.load() == nil)
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(await Self.failure { try await device.accessToken() } == .notSignedIn)
    }

    @Test("100 concurrent accessToken() calls once the client's clock is past the token's expiry share exactly one refresh; all get the same new token, and it works")
    func singleFlightRefresh() async throws {
        let stack = try await Self.startStack()
        defer { stack.stopAll() }
        let clock = ClientClock()
        let device = Self.client(stack, clock: clock)
        let user = try await device.signUp(email: "fay@example.com", password: Self.password).user
        let original = try await device.accessToken()
        #expect(await device.refreshCount == 0, "a fresh token is used as it is")

        clock.advance(by: 901)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<100 { group.addTask { try await device.accessToken() } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(tokens.count == 100)
        #expect(Set(tokens).count == 1, "every caller got the same token")
        #expect(tokens.first != original)
        #expect(await device.refreshCount == 1)
        #expect(try await device.reloadUser().id == user.id)
        #expect(await device.refreshCount == 1, "the new token is used as it is")
        #expect(try await Self.refused(stack, try #require(tokens.first)) == false)
    }

    @Test("a FileTokenStore keeps the session in a 0600 file; after a refresh it holds the rotated refresh token; a relaunched client over the file starts .signedIn(user), reloads the user, and refreshes with the stored token")
    func relaunchFromFileStore() async throws {
        let stack = try await Self.startStack()
        defer { stack.stopAll() }
        let (directory, file) = try Self.sessionFile()
        defer { try? FileManager.default.removeItem(at: directory) }
        let clock = ClientClock()
        let device = Self.client(stack, store: FileTokenStore(url: file), clock: clock)
        let user = try await device.signUp(email: "gus@example.com", password: Self.password).user
        #expect(try Self.permissions(file) == 0o600)
        let saved = try #require(try FileTokenStore(url: file).load())
        let current = try await device.accessToken()
        #expect(saved.user == user && saved.accessToken == current)

        // A refresh: the file holds the rotated refresh token, and the access token handed out.
        clock.advance(by: 901)
        let token = try await device.accessToken()
        #expect(await device.refreshCount == 1)
        let rotated = try #require(try FileTokenStore(url: file).load())
        #expect(rotated.refreshToken != saved.refreshToken, "the rotated refresh token is saved")
        #expect(rotated.accessToken == token)
        #expect(try Self.permissions(file) == 0o600, "still 0600 once rewritten")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(leftovers == ["session.json"], "no temporary file left behind: \(leftovers)")

        // A relaunch: a new client over the same file.
        let relaunched = Self.client(stack, store: FileTokenStore(url: file))
        var states = relaunched.authState.makeAsyncIterator()
        #expect(await states.next() == .signedIn(user))
        #expect(try await relaunched.reloadUser().id == user.id)
        #expect(await relaunched.refreshCount == 0)

        // The stored refresh token is the live one: a launch whose clock is past expiry refreshes with it.
        let later = ClientClock()
        later.advance(by: 1800)
        let third = Self.client(stack, store: FileTokenStore(url: file), clock: later)
        let renewed = try await third.accessToken()
        #expect(await third.refreshCount == 1 && renewed != token)
        #expect(try await third.reloadUser().id == user.id)
        #expect(try FileTokenStore(url: file).load()?.accessToken == renewed)
    }

    @Test("provider sign-in: Apple (nonce, full name → displayName; a wrong nonce is invalidProviderToken) and Google; an anonymous user links by signing in; link lists the provider (providerAlreadyLinked, credentialAlreadyInUse); unlink (providerNotLinked, lastSignInMethod); past the window link is requiresRecentLogin until reauthenticate(with:)")
    func providers() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }

        let apple = Self.client(p.stack)
        let badNonce = await Self.failure {
            try await apple.signIn(with: .apple(idToken: p.apple("a-ada", rawNonce: "n1"), rawNonce: "not the nonce"))
        }
        guard case .invalidProviderToken? = badNonce else {
            Issue.record("a wrong nonce: \(String(describing: badNonce))")
            return
        }
        let ada = try await apple.signIn(
            with: .apple(
                idToken: p.apple("a-ada", rawNonce: "n2", email: "ada@privaterelay.appleid.com"), rawNonce: "n2",
                fullName: PersonNameParts(givenName: "Ada", familyName: "Lovelace"))
        ).user
        #expect(ada.displayName == "Ada Lovelace" && ada.providers == ["apple.com"] && ada.email == "ada@privaterelay.appleid.com")
        #expect(await apple.currentState == .signedIn(ada))
        #expect(try await apple.reloadUser().displayName == "Ada Lovelace")

        let google = Self.client(p.stack)
        let ann = try await google.signIn(with: .google(idToken: p.google("g-ann", email: "ann@example.com"))).user
        #expect(ann.providers == ["google.com"] && ann.email == "ann@example.com" && ann.emailVerified)
        #expect(try await Self.client(p.stack).signIn(with: .google(idToken: p.google("g-ann"))).user.id == ann.id)

        let anonymousDevice = Self.client(p.stack)
        let anonymous = try await anonymousDevice.signInAnonymously()
        let linkedBySignIn = try await anonymousDevice.signIn(with: .apple(idToken: p.apple("a-new", rawNonce: "n3"), rawNonce: "n3"))
        #expect(linkedBySignIn.user.id == anonymous.id && !linkedBySignIn.user.isAnonymous && linkedBySignIn.migration == nil)
        #expect(await anonymousDevice.currentState == .signedIn(linkedBySignIn.user))

        // Linking and unlinking for a password user (within the recent-login window).
        let device = Self.client(p.stack)
        let u = try await device.signUp(email: "u@example.com", password: ProviderStack.password).user
        let linked = try await device.link(.google(idToken: p.google("g-u", email: "u@example.com")))
        #expect(linked.id == u.id && linked.providers == ["google.com", "password"])
        #expect(await device.currentUser?.providers == ["google.com", "password"])
        #expect(await Self.failure { try await device.link(.google(idToken: p.google("g-u"))) } == .providerAlreadyLinked)
        #expect(await Self.failure { try await device.link(.apple(idToken: p.apple("a-ada", rawNonce: "n4"), rawNonce: "n4")) } == .credentialAlreadyInUse)
        let unlinked = try await device.unlink(provider: "google.com")
        #expect(unlinked.id == u.id && unlinked.providers == ["password"])
        #expect(await device.currentUser?.providers == ["password"])
        #expect(await Self.failure { try await device.unlink(provider: "google.com") } == .providerNotLinked)
        // The password is not a provider (other codes come as `server` with their code).
        let password = await Self.failure { try await device.unlink(provider: "password") }
        #expect(password?.code == "invalid_argument" && password?.isNetworkError == false, "\(String(describing: password))")
        // Ada has only Apple: unlinking it would leave no way to sign in.
        #expect(await Self.failure { try await apple.unlink(provider: "apple.com") } == .lastSignInMethod)
        #expect(try await apple.reloadUser().providers == ["apple.com"])

        // Past the recent-login window: re-authenticate with the provider, then link.
        p.stack.advanceClock(by: .seconds(301))
        #expect(
            await Self.failure { try await google.link(.apple(idToken: p.apple("a-ann", rawNonce: "n5"), rawNonce: "n5")) }
                == .requiresRecentLogin(maxAgeSeconds: 300))
        try await google.reauthenticate(with: .google(idToken: p.google("g-ann")))
        let both = try await google.link(.apple(idToken: p.apple("a-ann", rawNonce: "n6"), rawNonce: "n6"))
        #expect(both.id == ann.id && both.providers == ["apple.com", "google.com"])
        #expect(try await google.reloadUser().providers == ["apple.com", "google.com"])
    }
}
