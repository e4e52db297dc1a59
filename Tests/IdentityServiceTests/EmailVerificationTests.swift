import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import GRDB
import IdentityCore
import Mail
@testable import IdentityService
import RPCRouting
import Testing

/// Email verification (issue 19 §3) through the handlers, on SQLite and PostgreSQL and a manual clock.
@Suite("Identity: email verification")
struct EmailVerificationTests {
    let strong = "glacier lantern marmalade"

    /// The harness's handlers in `mode`, and a caller over them.
    func handlers(_ h: Harness, _ mode: EmailFlowSettings.Verification) -> (IdentityHandlers, LocalCaller) {
        var handlers = h.handlers
        handlers.emailFlows.verification = mode
        return (handlers, LocalCaller(router: handlers.router()))
    }

    func storage(_ h: Harness) throws -> any IdentityStorage { identityStorage(h.store) }

    func mails(_ h: Harness) async throws -> [MailMessage] { try await queuedMails(in: storage(h), kind: "verify_email") }

    func me(_ h: Harness, _ id: String) -> AuthenticatedCaller { AuthenticatedCaller(userID: id, sessionID: "sid-1", authTime: h.clock.now) }

    func confirm(_ caller: LocalCaller, _ code: String) async throws -> EmailCodeResponse {
        try await caller.call(IdentityAPI.confirmEmailVerification, EmailCodeRequest(code: code))
    }

    @Test("off: sign-up mails nothing; the signed-in user asks for a mail (202 email, expiresIn); the code verifies once, stored only as its SHA-256; user.updated is published and the claims say email_verified", arguments: StoreKind.kept)
    func sendAndConfirm(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let (_, caller) = handlers(h, .off)
        let signedUp = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "Ada@Example.com", password: strong))
        #expect(try await mails(h).isEmpty)
        #expect(signedUp.hasSession && !signedUp.verificationRequired)
        let sent = try await caller.call(IdentityAPI.sendEmailVerification, SendEmailVerificationRequest(caller: me(h, signedUp.user.id)))
        #expect(sent == SendEmailVerificationResponse(email: "Ada@Example.com", expiresIn: 86_400))
        let mail = try #require(try await mails(h).first)
        #expect(mail.to == "Ada@Example.com" && mail.kind == "verify_email")
        let code = try #require(mail.code)
        let stored = try await rawCodeHashes(h.store, table: "email_actions")
        #expect(stored == [IdentityHandlers.resetCodeHash(code)])

        let confirmed = try await confirm(caller, code)
        #expect(confirmed.user.emailVerified && confirmed.user.version == signedUp.user.version + 1)
        #expect(confirmed.revokedSessionIDs.isEmpty)
        #expect(h.events.topics.contains(IdentityAPI.Topic.userUpdated))
        let claims = try await caller.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: signedUp.user.id))
        #expect(claims.emailVerified)
        await expectCode(.invalidVerificationCode) { try await confirm(caller, code) }
        await expectCode(.emailAlreadyVerified) {
            try await caller.call(IdentityAPI.sendEmailVerification, SendEmailVerificationRequest(caller: me(h, signedUp.user.id)))
        }
    }

    @Test("per-user limits: a second mail within a minute is rate_limited with the seconds to wait; a new code voids the older; five an hour", arguments: StoreKind.kept)
    func limits(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let (_, caller) = handlers(h, .off)
        let id = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "bo@example.com", password: strong)).user.id
        let send = SendEmailVerificationRequest(caller: me(h, id))
        _ = try await caller.call(IdentityAPI.sendEmailVerification, send)
        h.clock.advance(by: 20)
        do {
            _ = try await caller.call(IdentityAPI.sendEmailVerification, send)
            Issue.record("expected rate_limited")
        } catch let error as RPCError {
            #expect(error.code == .rateLimited)
            #expect(error.details[RPCError.retryAfterKey] == "40")
        }
        let first = try #require(try await mails(h).first?.code)
        h.clock.advance(by: 41)
        _ = try await caller.call(IdentityAPI.sendEmailVerification, send)
        let second = try #require(try await mails(h).last?.code)
        await expectCode(.invalidVerificationCode) { try await confirm(caller, first) }
        for _ in 0..<3 {
            h.clock.advance(by: 61)
            _ = try await caller.call(IdentityAPI.sendEmailVerification, send)
        }
        h.clock.advance(by: 61)
        await expectCode(.rateLimited) { try await caller.call(IdentityAPI.sendEmailVerification, send) }
        #expect(try await mails(h).count == 5)
        #expect(try await storage(h).probes.activeEmailVerificationCount(userID: UserID(id), now: h.clock.now) == 1)
        _ = second
    }

    @Test("a code for an address the user no longer has does nothing; expired, malformed and unknown codes are invalid_verification_code; a disabled user's code is user_disabled", arguments: StoreKind.kept)
    func invalidCodes(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let (handlers, caller) = handlers(h, .send)
        let id = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "cy@example.com", password: strong)).user.id
        let oldCode = try #require(try await mails(h).first?.code)
        // The address changes (however F2's change does it): the old address's code stops working.
        _ = try await h.store.update(id: UserID(id), expectedVersion: nil, now: h.clock.now) { user in
            user.email = "cy2@example.com"
            user.emailNormalized = "cy2@example.com"
        }
        await expectCode(.invalidVerificationCode) { try await confirm(caller, oldCode) }
        #expect(try await h.store.user(id: UserID(id))?.emailVerified == false)

        h.clock.advance(by: 61)
        _ = try await caller.call(IdentityAPI.sendEmailVerification, SendEmailVerificationRequest(caller: me(h, id)))
        let code = try #require(try await mails(h).last?.code)
        #expect(try await mails(h).last?.to == "cy2@example.com")
        _ = try await caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: id, disabled: true))
        await expectCode(.userDisabled) { try await confirm(caller, code) }
        _ = try await caller.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: id, disabled: false))
        h.clock.advance(by: handlers.emailFlows.verificationTTL + 1)
        await expectCode(.invalidVerificationCode) { try await confirm(caller, code) }
        for bad in ["", "nope", String(repeating: "A", count: 43), String(repeating: "a", count: 200)] {
            await expectCode(.invalidVerificationCode) { try await confirm(caller, bad) }
        }
        #expect(try await h.store.user(id: UserID(id))?.emailVerified == false)
    }

    @Test("an anonymous caller is invalid_argument; a request by address answers the same for known, unknown and verified addresses and mails only the unverified account", arguments: StoreKind.kept)
    func anonymousAndByAddress(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let (handlers, caller) = handlers(h, .off)
        let anon = try await caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user.id
        await expectCode(.invalidArgument) {
            try await caller.call(IdentityAPI.sendEmailVerification, SendEmailVerificationRequest(caller: me(h, anon)))
        }
        _ = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "di@example.com", password: strong))
        #expect(try await caller.call(IdentityAPI.requestEmailVerification, EmailVerificationRequest(email: "di@example.com")) == Empty())
        #expect(try await caller.call(IdentityAPI.requestEmailVerification, EmailVerificationRequest(email: "no@example.com")) == Empty())
        await expectCode(.invalidEmail) {
            try await caller.call(IdentityAPI.requestEmailVerification, EmailVerificationRequest(email: "not an email"))
        }
        try await waitUntil("the mail for di is queued") { try await mails(h).count == 1 }
        // The work behind it, directly: unknown → noAccount; within the limits → limited (silent).
        #expect(await handlers.emailVerification.sendEmailVerification(normalizedEmail: "no@example.com", locale: "en") == .noAccount)
        #expect(await handlers.emailVerification.sendEmailVerification(normalizedEmail: "di@example.com", locale: "en") == .limited(retryAfterSeconds: 60))
        let code = try #require(try await mails(h).first?.code)
        _ = try await confirm(caller, code)
        h.clock.advance(by: 61)
        #expect(await handlers.emailVerification.sendEmailVerification(normalizedEmail: "di@example.com", locale: "ja") == .noAccount)
        #expect(try await mails(h).count == 1)
    }

    @Test("send: sign-up and an anonymous user's upgrade mail a verification in the same transaction (a refused sign-up mails nothing) in the request's language; sessions as before", arguments: StoreKind.kept)
    func sendMode(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let (_, caller) = handlers(h, .send)
        let signedUp = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "ed@example.com", password: strong, locale: "ja,en"))
        #expect(signedUp.hasSession && !signedUp.tokens.accessToken.isEmpty)
        #expect(try await mails(h).map(\.to) == ["ed@example.com"])
        #expect(try await mails(h).first?.subject.contains("確認") == true)
        await expectCode(.emailExists) { try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "ED@example.com", password: strong)) }
        #expect(try await mails(h).count == 1)

        let anon = try await caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest())
        let upgraded = try await caller.call(
            IdentityAPI.upgradeAnonymous,
            UpgradeAnonymousRequest(caller: me(h, anon.user.id), email: "fay@example.com", password: strong))
        #expect(upgraded.hasSession && !upgraded.user.emailVerified)
        #expect(try await mails(h).map(\.to) == ["ed@example.com", "fay@example.com"])
        let code = try #require(try await mails(h).last?.code)
        #expect(try await confirm(caller, code).user.id == anon.user.id)
        await expectCode(.invalidArgument) {
            try await caller.call(
                IdentityAPI.upgradeAnonymous, UpgradeAnonymousRequest(caller: me(h, anon.user.id), email: "gil@example.com", password: strong))
        }
        await expectCode(.invalidArgument) {
            try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "gil@example.com", password: strong, locale: String(repeating: "ja,", count: 30)))
        }
        #expect(try await mails(h).count == 2)
        // Sign-in is not gated under send.
        #expect(try await caller.call(IdentityAPI.signIn, SignInRequest(email: "ed@example.com", password: strong)).hasSession)
    }

    @Test("the store writes the user and its code and mail in one transaction: a refused insert or upgrade leaves neither", arguments: StoreKind.kept)
    func oneTransaction(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let (handlers, caller) = handlers(h, .off)
        let taken = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "jo@example.com", password: strong)).user.id
        let pending = handlers.signUpMail.pendingVerification(to: "jo@example.com", normalized: "jo@example.com", locale: "en", now: h.clock.now)
        let twin = UserRecord(id: .random(), email: try EmailAddress("JO@example.com"), createdAt: h.clock.now)
        await expectCode(.emailExists) { try await storage(h).insert(twin, verification: pending) }
        let anon = try await caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user.id
        await expectCode(.emailExists) {
            try await storage(h).update(id: UserID(anon), now: h.clock.now, verification: pending) { user in
                user.email = "jo@example.com"
                user.emailNormalized = "jo@example.com"
                user.isAnonymous = false
            }
        }
        #expect(try await mails(h).isEmpty)
        #expect(try await storage(h).probes.activeEmailVerificationCount(userID: UserID(taken), now: h.clock.now) == 0)
        #expect(try await rawStrings(h.store, sqlite: "SELECT CAST(COUNT(*) AS TEXT) FROM email_actions", postgres: "SELECT count(*)::text FROM email_actions") == ["0"])
    }

    @Test("required: sign-up answers verificationRequired with no session; password sign-in is email_not_verified only with the right password; after verifying, sign-in works; re-authentication is not gated", arguments: StoreKind.kept)
    func requiredMode(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let (_, caller) = handlers(h, .required)
        let issuedBefore = h.tokens.requests.count
        let signedUp = try await caller.call(IdentityAPI.signUp, SignUpRequest(email: "gus@example.com", password: strong))
        #expect(signedUp.verificationRequired && !signedUp.hasSession && signedUp.tokens.accessToken.isEmpty)
        #expect(signedUp.user.lastSignInAt == nil)
        #expect(h.tokens.requests.count == issuedBefore)
        await expectCode(.invalidCredentials) {
            try await caller.call(IdentityAPI.signIn, SignInRequest(email: "gus@example.com", password: "wrong password here"))
        }
        await expectCode(.emailNotVerified) { try await caller.call(IdentityAPI.signIn, SignInRequest(email: "gus@example.com", password: strong)) }
        #expect(h.tokens.requests.count == issuedBefore)
        let code = try #require(try await mails(h).first?.code)
        _ = try await confirm(caller, code)
        let signedIn = try await caller.call(IdentityAPI.signIn, SignInRequest(email: "gus@example.com", password: strong))
        #expect(signedIn.hasSession && signedIn.user.emailVerified)
        #expect(h.tokens.requests.last?.claims.emailVerified == true)

        // A user made before the mode (unverified) is refused too, and can ask for a mail by address.
        let (_, offCaller) = handlers(h, .off)
        let old = try await offCaller.call(IdentityAPI.signUp, SignUpRequest(email: "hal@example.com", password: strong))
        await expectCode(.emailNotVerified) { try await caller.call(IdentityAPI.signIn, SignInRequest(email: "hal@example.com", password: strong)) }
        // Re-authentication of an existing session is not gated.
        let reauth = ReauthenticateRequest(caller: me(h, old.user.id), password: strong)
        #expect(try await caller.call(IdentityAPI.reauthenticate, reauth).hasSession)
    }

    @Test("required: an anonymous caller signing in to an unverified account is email_not_verified before any migration", arguments: StoreKind.kept)
    func requiredMigratingSignIn(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let (_, caller) = handlers(h, .required)
        let (_, offCaller) = handlers(h, .off)
        _ = try await offCaller.call(IdentityAPI.signUp, SignUpRequest(email: "ivy@example.com", password: strong))
        let anon = try await caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest())
        let signIn = SignInRequest(email: "ivy@example.com", password: strong, caller: me(h, anon.user.id), allowMigration: true)
        await expectCode(.emailNotVerified) { try await caller.call(IdentityAPI.signIn, signIn) }
        #expect(try await h.store.user(id: UserID(anon.user.id))?.isAnonymous == true)
    }
}
