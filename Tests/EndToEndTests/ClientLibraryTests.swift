import Foundation
import GatehouseClient
import GatehouseTestSupport
import Testing

/// The client library (issue 23) driven against three real processes, through its public API
/// only: raw HTTP appears only where a test needs a second actor or a look at the server's side.
/// The suite is split in three files: accounts here, sessions and providers in
/// ClientLibrarySessionTests, live updates in ClientLibraryStreamTests.
@Suite("Client library (GatehouseClient) against a running stack")
struct ClientLibraryTests {
    static let password = "correct horse battery"
    static let newPassword = "saffron kettle obelisk"

    // MARK: Helpers

    /// The clock a client reads (`Configuration.now`): the system time plus an offset the test moves.
    final class ClientClock: @unchecked Sendable {
        private let lock = NSLock()
        private var offset: TimeInterval = 0

        func advance(by seconds: TimeInterval) { lock.withLock { offset += seconds } }
        var now: Date { lock.withLock { Date().addingTimeInterval(offset) } }
    }

    /// What a consumer of a stream has seen so far, and whether (and with what error) it ended.
    final class Seen<Element: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [Element] = []
        private var end: (any Error)??

        var values: [Element] { lock.withLock { items } }
        var ended: Bool { lock.withLock { end != nil } }
        /// The error the stream ended with (nil while open or when it finished without one).
        var error: (any Error)? { lock.withLock { end ?? nil } }

        func add(_ item: Element) { lock.withLock { items.append(item) } }
        func finish(_ error: (any Error)?) { lock.withLock { end = .some(error) } }
    }

    /// Starts consuming `stream` in a task: what it yields and how it ends go to the returned `Seen`.
    static func consume<S: AsyncSequence & Sendable>(_ stream: S) -> (seen: Seen<S.Element>, task: Task<Void, Never>) where S.Element: Sendable {
        let seen = Seen<S.Element>()
        let task = Task {
            do {
                for try await item in stream { seen.add(item) }
                seen.finish(nil)
            } catch {
                seen.finish(error)
            }
        }
        return (seen, task)
    }

    /// A stack of three processes, `environment` added for every role.
    static func startStack(_ environment: [String: String] = [:]) async throws -> Stack {
        let stack = Stack()
        do {
            for role in ["identity", "token", "gateway"] { try stack.start(role, environment: environment) }
            try await stack.waitReady()
        } catch {
            stack.stopAll()
            throw error
        }
        return stack
    }

    /// A client of the server at `baseURL`, reading `clock` when given.
    static func client(_ baseURL: String, store: any TokenStore = InMemoryTokenStore(), clock: ClientClock? = nil) -> GatehouseClient {
        var configuration = GatehouseClient.Configuration(requestTimeout: 15, reconnectDelay: 0.2, maximumReconnectDelay: 2)
        if let clock { configuration.now = { clock.now } }
        return GatehouseClient(baseURL: URL(string: baseURL)!, tokenStore: store, configuration: configuration)
    }

    /// A client of `stack`'s gateway.
    static func client(_ stack: Stack, store: any TokenStore = InMemoryTokenStore(), clock: ClientClock? = nil) -> GatehouseClient {
        client(stack.baseURL, store: store, clock: clock)
    }

    /// The `GatehouseError` `body` throws. Records an issue when it throws nothing or another
    /// error, and when the error has no sentence for the user (every error must have one).
    static func failure<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T) async -> GatehouseError? {
        do {
            let value = try await body()
            Issue.record("expected a GatehouseError, got \(value)", sourceLocation: sourceLocation)
            return nil
        } catch let error as GatehouseError {
            #expect(!(error.errorDescription ?? "").isEmpty, "\(error) has no errorDescription", sourceLocation: sourceLocation)
            return error
        } catch {
            Issue.record("expected a GatehouseError, got \(error)", sourceLocation: sourceLocation)
            return nil
        }
    }

    /// The code of mail number `number` of `kind` delivered to `address` (waiting for it).
    static func mailedCode(_ stack: Stack, _ kind: String, to address: String, number: Int = 1) async throws -> String {
        func mails() throws -> [DeliveredMail] { try stack.deliveredMails(kind).filter { $0.to == address } }
        try await waitUntil("mail \(number) of \(kind) to \(address)") { try mails().count >= number }
        return try #require(try mails()[number - 1].code)
    }

    /// Whether `GET /v1/me` with `token` is refused by the server (asked directly, not through a client).
    static func refused(_ stack: Stack, _ token: String) async throws -> Bool {
        try await stack.request("GET", "/v1/me", bearer: token).status == 401
    }

    // MARK: Accounts

    @Test("sign-up, sign-in, password strength and sign-out: each succeeds and updates the state; email_exists, invalid_email, weak_password with reasons, invalid_credentials (not a network error) and notSignedIn are typed")
    func signUpSignInSignOut() async throws {
        let stack = try await Self.startStack()
        defer { stack.stopAll() }
        let store = InMemoryTokenStore()
        let ada = Self.client(stack, store: store)
        #expect(await ada.currentState == .signedOut)
        #expect(await Self.failure { try await ada.accessToken() } == .notSignedIn)

        let signedUp = try await ada.signUp(email: "ada@example.com", password: Self.password, displayName: "Ada")
        guard case .signedIn(let user) = signedUp else {
            Issue.record("sign-up without a session: \(signedUp)")
            return
        }
        #expect(user.email == "ada@example.com" && user.displayName == "Ada" && !user.isAnonymous && user.providers == ["password"])
        #expect(await ada.currentState == .signedIn(user))
        #expect(await ada.currentUser == user)
        #expect(try store.load()?.user == user, "the session is saved with its user")

        let other = Self.client(stack)
        #expect(await Self.failure { try await other.signUp(email: "ada@example.com", password: Self.password) } == .emailExists)
        #expect(await Self.failure { try await other.signUp(email: "not an email", password: Self.password) } == .invalidEmail)
        let weak = await Self.failure { try await other.signUp(email: "bo@example.com", password: "password") }
        guard case .weakPassword(let reasons)? = weak else {
            Issue.record("a weak password: \(String(describing: weak))")
            return
        }
        #expect(!reasons.isEmpty)
        let wrong = await Self.failure { try await other.signIn(email: "ada@example.com", password: "not the password") }
        #expect(wrong == .invalidCredentials)
        #expect(wrong?.isNetworkError == false && wrong?.code == "invalid_credentials")
        #expect(await other.currentState == .signedOut, "failures leave the device signed out")

        let signedIn = try await other.signIn(email: "ada@example.com", password: Self.password)
        #expect(signedIn.user.id == user.id && signedIn.migration == nil)
        #expect(await other.currentState == .signedIn(signedIn.user))

        let weakStrength = try await ada.passwordStrength("password")
        let strong = try await ada.passwordStrength("saffron kettle obelisk quantum")
        #expect(weakStrength.score <= 1 && weakStrength.level == "weak", "\(weakStrength)")
        #expect(strong.score > weakStrength.score && strong.level != "weak", "\(strong)")

        // Sign-out: the device forgets the session and the server refuses its token.
        let token = try await ada.accessToken()
        await ada.signOut()
        #expect(await ada.currentState == .signedOut)
        #expect(try store.load() == nil)
        #expect(try await Self.refused(stack, token))
        #expect(await Self.failure { try await ada.reloadUser() } == .notSignedIn)
        // The other device's session is untouched.
        #expect(try await other.reloadUser().id == user.id)
    }

    @Test("anonymous start, sign-in to an unknown email (userNotFound), upgrade keeping the id; migration: migrationRequired, then resume(allowMigration: true) migrates the anonymous id; signIn(allowMigration: false) migrates at once; authState follows")
    func anonymousUpgradeAndMigration() async throws {
        let stack = try await Self.startStack()
        defer { stack.stopAll() }
        let device = Self.client(stack)
        let states = Self.consume(device.authState)
        defer { states.task.cancel() }

        let anonymous = try await device.signInAnonymously()
        #expect(anonymous.isAnonymous && anonymous.email == nil && anonymous.providers.isEmpty)
        #expect(await device.currentState == .anonymous(anonymous))
        #expect(await Self.failure { try await device.signIn(email: "ann@example.com", password: Self.password) } == .userNotFound)
        let existing = Self.client(stack)
        let bea = try await existing.signUp(email: "bea@example.com", password: Self.password).user
        #expect(await Self.failure { try await device.upgrade(email: "bea@example.com", password: Self.password) } == .emailExists)

        let upgraded = try await device.upgrade(email: "ann@example.com", password: Self.password, displayName: "Ann")
        #expect(upgraded.id == anonymous.id, "an upgrade keeps the user's id")
        #expect(!upgraded.isAnonymous && upgraded.email == "ann@example.com" && upgraded.providers == ["password"])
        #expect(await device.currentState == .signedIn(upgraded))
        try await waitUntil("authState saw signed out, anonymous, signed in") { states.seen.values.count >= 3 }
        #expect(Array(states.seen.values.prefix(3)) == [.signedOut, .anonymous(anonymous), .signedIn(upgraded)])
        #expect(try await device.reloadUser().id == anonymous.id)

        // Migration with the user's decision asked for.
        let second = Self.client(stack)
        let other = try await second.signInAnonymously()
        #expect(await Self.failure { try await second.signIn(email: "bea@example.com", password: "not the password") } == .invalidCredentials)
        #expect(await second.currentState == .anonymous(other), "a wrong password keeps the anonymous user")
        let required = await Self.failure { try await second.signIn(email: "bea@example.com", password: Self.password) }
        guard case .migrationRequired(let context)? = required else {
            Issue.record("expected migrationRequired: \(String(describing: required))")
            return
        }
        #expect(context.anonymousUserID == other.id && context.existingUserID == bea.id && context.expiresIn > 0)
        #expect(await second.currentState == .anonymous(other), "nothing changed until the user decides")
        let resumed = try await second.resume(context, allowMigration: true)
        #expect(resumed.user.id == bea.id)
        let migration = try #require(resumed.migration)
        #expect(migration.oldUserId == other.id && migration.newUserId == bea.id && migration.performMigration)
        #expect(await second.currentState == .signedIn(resumed.user))
        #expect(try await second.reloadUser().id == bea.id)
        let again = await Self.failure { try await second.resume(context, allowMigration: true) }
        #expect(again?.isNetworkError == false && again != nil, "a used handle is refused: \(String(describing: again))")

        // Migration decided up front.
        let third = Self.client(stack)
        let thirdAnonymous = try await third.signInAnonymously()
        let direct = try await third.signIn(email: "bea@example.com", password: Self.password, allowMigration: false)
        #expect(direct.user.id == bea.id)
        let decided = try #require(direct.migration)
        #expect(decided.oldUserId == thirdAnonymous.id && decided.newUserId == bea.id && !decided.performMigration)
        #expect(await third.currentState == .signedIn(direct.user))
    }

    @Test("past the recent-login window a password change is requiresRecentLogin(300); reauthenticate(password:) (wrong: invalidCredentials) then changePassword: the old password fails, the new works, other sessions end with sessionEnded")
    func recentLoginAndPasswordChange() async throws {
        let stack = try await Self.startStack()
        defer { stack.stopAll() }
        let device = Self.client(stack)
        let user = try await device.signUp(email: "cy@example.com", password: Self.password).user
        let laptop = Self.client(stack)
        _ = try await laptop.signIn(email: "cy@example.com", password: Self.password)
        // Past the recent-login window (300 s), within the access token's lifetime (900 s).
        stack.advanceClock(by: .seconds(301))

        #expect(await Self.failure { try await device.changePassword(to: Self.newPassword) } == .requiresRecentLogin(maxAgeSeconds: 300))
        #expect(await Self.failure { try await device.reauthenticate(password: "not the password") } == .invalidCredentials)
        #expect(await device.currentState == .signedIn(user), "a failed re-authentication keeps the session")
        let before = try await device.accessToken()
        try await device.reauthenticate(password: Self.password)
        let after = try await device.accessToken()
        #expect(after != before, "re-authentication replaces the session")
        #expect(try await Self.refused(stack, before))

        let changed = try await device.changePassword(to: Self.newPassword)
        #expect(changed.id == user.id && changed.providers == ["password"])
        let fresh = Self.client(stack)
        #expect(await Self.failure { try await fresh.signIn(email: "cy@example.com", password: Self.password) } == .invalidCredentials)
        #expect(try await fresh.signIn(email: "cy@example.com", password: Self.newPassword).user.id == user.id)
        // The change ended the laptop's session, kept this one.
        let ended = await Self.failure { try await laptop.reloadUser() }
        guard case .sessionEnded? = ended else {
            Issue.record("expected sessionEnded: \(String(describing: ended))")
            return
        }
        #expect(await laptop.currentState == .signedOut)
        #expect(try await device.reloadUser().id == user.id)
    }

    @Test("changeEmail: email_exists and invalid_email; a case-only change is .changed at once; another address is .pending until confirmEmailChange with the mailed code (a wrong code is invalidCode); updateProfile merges settings and .null removes; reloadUser agrees")
    func emailChangeAndProfile() async throws {
        let stack = try await Self.startStack()
        defer { stack.stopAll() }
        let device = Self.client(stack)
        let user = try await device.signUp(email: "dee@example.com", password: Self.password).user
        _ = try await Self.client(stack).signUp(email: "taken@example.com", password: Self.password)

        #expect(await Self.failure { try await device.changeEmail(to: "taken@example.com") } == .emailExists)
        #expect(await Self.failure { try await device.changeEmail(to: "not-an-email") } == .invalidEmail)
        let caseOnly = try await device.changeEmail(to: "Dee@example.com")
        guard case .changed(let recased) = caseOnly else {
            Issue.record("a case-only change is applied at once: \(caseOnly)")
            return
        }
        #expect(recased.id == user.id && recased.email == "Dee@example.com")
        #expect(await device.currentUser?.email == "Dee@example.com")

        let change = try await device.changeEmail(to: "dee.new@example.com")
        guard case .pending(let pending) = change else {
            Issue.record("a new address waits for its code: \(change)")
            return
        }
        #expect(pending.pendingEmail == "dee.new@example.com" && pending.expiresIn > 0 && pending.user.email == "Dee@example.com")
        #expect(await device.currentUser?.email == "Dee@example.com")
        #expect(await Self.failure { try await device.confirmEmailChange(code: "not-a-code") } == .invalidCode(code: "invalid_email_change_code"))
        let code = try await Self.mailedCode(stack, "change_email", to: "dee.new@example.com")
        try await device.confirmEmailChange(code: code)
        let confirmed = await device.currentUser
        #expect(confirmed?.email == "dee.new@example.com" && confirmed?.emailVerified == true, "the client reloads the user after confirming")
        #expect(try await Self.client(stack).signIn(email: "dee.new@example.com", password: Self.password).user.id == user.id)

        let first = try await device.updateProfile(
            ProfileUpdate(displayName: "Dee", settings: ["theme": .string("dark"), "n": .number(1), "nested": .object(["a": .bool(true), "b": .number(2)])]))
        #expect(first.displayName == "Dee")
        #expect(first.settings == ["theme": .string("dark"), "n": .number(1), "nested": .object(["a": .bool(true), "b": .number(2)])])
        let second = try await device.updateProfile(
            ProfileUpdate(photoURL: "https://example.com/dee.png", settings: ["theme": .null, "nested": .object(["b": .null, "c": .string("x")])]))
        #expect(second.displayName == "Dee", "a field left nil is unchanged")
        #expect(second.photoURL == "https://example.com/dee.png")
        #expect(second.settings == ["n": .number(1), "nested": .object(["a": .bool(true), "c": .string("x")])])
        #expect(await device.currentUser == second)
        let reloaded = try await device.reloadUser()
        #expect(reloaded.settings == second.settings && reloaded.displayName == "Dee" && reloaded.email == "dee.new@example.com")

        // The old address's owner reverts the change: the old address is back and every session
        // ends, this device's too (it finds out as it reloads the user).
        #expect(await Self.failure { try await device.revertEmailChange(code: "not-a-code") } == .invalidCode(code: "invalid_email_change_code"))
        let revert = try await Self.mailedCode(stack, "email_changed", to: "Dee@example.com")
        try await device.revertEmailChange(code: revert)
        #expect(await device.currentState == .signedOut)
        #expect(await Self.failure { try await device.signIn(email: "dee.new@example.com", password: Self.password) } == .invalidCredentials)
    }

    @Test("email verification (code from mail; a wrong code is invalidCode) makes emailVerified true; a password reset (invalid_email, a wrong code) ends every session; deleteAccount continueAnonymously gives a new anonymous user, plain deleteAccount signs out")
    func verificationResetAndDeletion() async throws {
        let stack = try await Self.startStack()
        defer { stack.stopAll() }
        let store = InMemoryTokenStore()
        let device = Self.client(stack, store: store)
        let user = try await device.signUp(email: "eve@example.com", password: Self.password).user
        #expect(!user.emailVerified)

        let sent = try await device.sendEmailVerification()
        #expect(sent.email == "eve@example.com" && sent.expiresIn > 0)
        #expect(await Self.failure { try await device.confirmEmailVerification(code: "not-a-code") } == .invalidCode(code: "invalid_verification_code"))
        let verification = try await Self.mailedCode(stack, "verify_email", to: "eve@example.com")
        try await device.confirmEmailVerification(code: verification)
        #expect(await device.currentUser?.emailVerified == true)
        #expect(try await device.reloadUser().emailVerified)

        // Password reset: every session ends, the new password signs in.
        #expect(await Self.failure { try await device.requestPasswordReset(email: "not an email") } == .invalidEmail)
        try await device.requestPasswordReset(email: "nobody@example.com")
        try await device.requestPasswordReset(email: "eve@example.com")
        let resetCode = try await Self.mailedCode(stack, "password_reset", to: "eve@example.com")
        #expect(try stack.deliveredMails("password_reset").map(\.to) == ["eve@example.com"], "no mail for an unknown address")
        #expect(
            await Self.failure { try await device.confirmPasswordReset(code: "not-a-code", newPassword: Self.newPassword) }
                == .invalidCode(code: "invalid_reset_code"))
        let oldToken = try await device.accessToken()
        try await device.confirmPasswordReset(code: resetCode, newPassword: Self.newPassword)
        #expect(try await Self.refused(stack, oldToken))
        let ended = await Self.failure { try await device.reloadUser() }
        guard case .sessionEnded? = ended else {
            Issue.record("expected sessionEnded after the reset: \(String(describing: ended))")
            return
        }
        #expect(await device.currentState == .signedOut)
        #expect(try store.load() == nil)
        #expect(await Self.failure { try await device.signIn(email: "eve@example.com", password: Self.password) } == .invalidCredentials)
        #expect(try await device.signIn(email: "eve@example.com", password: Self.newPassword).user.id == user.id)

        // Deletion, continuing anonymously, then deletion of the anonymous user.
        let deletedToken = try await device.accessToken()
        let continued = try #require(try await device.deleteAccount(continueAnonymously: true))
        #expect(continued.isAnonymous && continued.id != user.id)
        #expect(await device.currentState == .anonymous(continued))
        #expect(try await Self.refused(stack, deletedToken))
        #expect(await Self.failure { try await Self.client(stack).signIn(email: "eve@example.com", password: Self.newPassword) } == .invalidCredentials)
        let anonymousToken = try await device.accessToken()
        #expect(try await device.deleteAccount() == nil)
        #expect(await device.currentState == .signedOut)
        #expect(try store.load() == nil)
        #expect(try await Self.refused(stack, anonymousToken))

        // A plain deletion of an account with a password: signed out, the email free again.
        let zed = Self.client(stack)
        _ = try await zed.signUp(email: "zed@example.com", password: Self.password)
        #expect(try await zed.deleteAccount() == nil)
        #expect(await zed.currentState == .signedOut)
        #expect(await Self.failure { try await zed.signIn(email: "zed@example.com", password: Self.password) } == .invalidCredentials)
        #expect(try await zed.signUp(email: "zed@example.com", password: Self.password).user.email == "zed@example.com")
    }

    @Test("GATEHOUSE_EMAIL_VERIFICATION=required: signUp is .verificationRequired without a session, signIn is emailNotVerified; requestEmailVerification(email:) mails a code that verifies the address, then signIn works")
    func verificationRequired() async throws {
        let stack = try await Self.startStack(["GATEHOUSE_EMAIL_VERIFICATION": "required"])
        defer { stack.stopAll() }
        let store = InMemoryTokenStore()
        let device = Self.client(stack, store: store)
        let signedUp = try await device.signUp(email: "hal@example.com", password: Self.password)
        guard case .verificationRequired(let user) = signedUp else {
            Issue.record("expected verificationRequired: \(signedUp)")
            return
        }
        #expect(user.email == "hal@example.com" && !user.emailVerified)
        #expect(await device.currentState == .signedOut)
        #expect(try store.load() == nil)
        #expect(await Self.failure { try await device.signIn(email: "hal@example.com", password: Self.password) } == .emailNotVerified)

        stack.advanceClock(by: .seconds(61))  // past the one-a-minute limit per user
        try await device.requestEmailVerification(email: "hal@example.com")
        let code = try await Self.mailedCode(stack, "verify_email", to: "hal@example.com", number: 2)
        try await device.confirmEmailVerification(code: code)
        let signedIn = try await device.signIn(email: "hal@example.com", password: Self.password)
        #expect(signedIn.user.id == user.id && signedIn.user.emailVerified)
        #expect(await device.currentState == .signedIn(signedIn.user))
    }
}
