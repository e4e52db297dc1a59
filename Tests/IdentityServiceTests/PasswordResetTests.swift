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

/// Password reset (scenario A30) through the handlers, on SQLite and PostgreSQL and a manual clock.
@Suite("Identity: password reset")
struct PasswordResetTests {
    let strong = "glacier lantern marmalade"
    let fresh = "saffron kettle obelisk"

    func storage(_ h: Harness) throws -> any IdentityStorage { identityStorage(h.store) }

    func outbox(_ h: Harness) async throws -> [MailMessage] { try await queuedMails(in: storage(h)) }

    func signUp(_ h: Harness, _ email: String) async throws -> String {
        try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: email, password: strong)).user.id
    }

    func signIn(_ h: Harness, _ email: String, _ password: String) async throws -> AuthResponse {
        try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: email, password: password))
    }

    func confirm(_ h: Harness, _ code: String, _ password: String) async throws -> ConfirmPasswordResetResponse {
        try await h.caller.call(IdentityAPI.confirmPasswordReset, ConfirmPasswordResetRequest(code: code, password: password))
    }

    @Test("reset rows expired or used a day ago are purged; a live code's row stays", arguments: StoreKind.kept)
    func purgeOldCodes(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let old = UserID(try await signUp(h, "old@example.com"))
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "old@example.com", locale: "en") == .queued)
        h.clock.advance(by: 2 * 86_400)
        let live = UserID(try await signUp(h, "live@example.com"))
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "live@example.com", locale: "en") == .queued)
        #expect(try await storage(h).purgePasswordResets(before: h.clock.now.addingTimeInterval(-86_400)) == 1)
        #expect(try await storage(h).probes.passwordResetCount(userID: old) == 0)
        #expect(try await storage(h).probes.passwordResetCount(userID: live) == 1)
    }

    @Test("a code mailed before the email or the password changed no longer works", arguments: StoreKind.kept)
    func codesEndWithTheirCredentials(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let id = try await signUp(h, "eve@example.com")
        let me = AuthenticatedCaller(userID: id, sessionID: "sid-1", authTime: h.clock.now)
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "eve@example.com", locale: "en") == .queued)
        let first = try #require(try await outbox(h).last?.code)
        _ = try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: me, email: "eve2@example.com"))
        let changeCode = try #require(try await outbox(h).last?.code)  // pending: the reset code still works until confirmed
        _ = try await h.caller.call(IdentityAPI.confirmEmailChange, EmailCodeRequest(code: changeCode))
        await expectCode(.invalidResetCode) { try await confirm(h, first, fresh) }
        h.clock.advance(by: 61)
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "eve2@example.com", locale: "en") == .queued)
        let second = try #require(try await outbox(h).last?.code)
        _ = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: me, password: "another fine passphrase"))
        await expectCode(.invalidResetCode) { try await confirm(h, second, fresh) }
        #expect(try await signIn(h, "eve2@example.com", "another fine passphrase").user.id == id)
    }

    @Test("a known email gets one mail whose code is stored only as its SHA-256; confirming sets the password, revokes every session, and the code works once", arguments: StoreKind.kept)
    func requestAndConfirm(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let id = try await signUp(h, "Ada@Example.com")
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "ada@example.com", locale: "en") == .queued)
        let mails = try await outbox(h)
        #expect(mails.count == 1)
        let mail = try #require(mails.first)
        #expect(mail.kind == "password_reset" && mail.to == "Ada@Example.com" && mail.from == "Gatehouse <no-reply@localhost>")
        #expect(mail.subject == "Reset your Gatehouse password")
        #expect(mail.text.contains("60 minutes") && !mail.text.contains("mode=resetPassword"))
        let code = try #require(mail.code)
        #expect(try #require(mail.html).contains(code))
        // Only the hash is stored.
        let stored = try await rawCodeHashes(h.store, table: "password_resets")
        #expect(stored == [IdentityHandlers.resetCodeHash(code)])
        let dump = try await rawStrings(
            h.store, sqlite: "SELECT quote(code_hash) || user_id FROM password_resets",
            postgres: "SELECT encode(code_hash, 'hex') || user_id FROM password_resets")
        #expect(!dump.joined().contains(code))

        h.clock.advance(by: 60)
        let reply = try await confirm(h, code, fresh)
        #expect(reply.revokedSessionIDs.isEmpty)  // the fake token service revokes nothing
        #expect(h.tokens.revocations.map(\.reason) == ["password_reset", "password_reset"])
        #expect(h.tokens.revocations.allSatisfy { $0.userID == id && $0.exceptSessionID == nil })
        await expectCode(.invalidCredentials) { try await signIn(h, "ada@example.com", strong) }
        #expect(try await signIn(h, "ada@example.com", fresh).user.id == id)
        await expectCode(.invalidResetCode) { try await confirm(h, code, "another fine passphrase") }
    }

    @Test("a newer request voids the older code; an expired code is refused; unknown and malformed codes answer invalid_reset_code", arguments: StoreKind.kept)
    func newerVoidsOlderAndExpiry(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        _ = try await signUp(h, "bo@example.com")
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "bo@example.com", locale: "en") == .queued)
        h.clock.advance(by: 61)
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "bo@example.com", locale: "en") == .queued)
        let codes = try await outbox(h).compactMap(\.code)
        #expect(codes.count == 2 && codes[0] != codes[1])
        await expectCode(.invalidResetCode) { try await confirm(h, codes[0], fresh) }
        await expectCode(.invalidResetCode) { try await confirm(h, "not-a-code", fresh) }
        await expectCode(.invalidResetCode) { try await confirm(h, IdentityHandlers.newResetCode(), fresh) }
        h.clock.advance(by: 3600)  // the second code is now 3600 s old: expired
        await expectCode(.invalidResetCode) { try await confirm(h, codes[1], fresh) }
        _ = try await signIn(h, "bo@example.com", strong)
    }

    @Test("an unknown email, a disabled or an anonymous user: no code, no mail; a malformed email: invalid_email", arguments: StoreKind.kept)
    func noMailWithoutAnAccount(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "nobody@example.com", locale: "en") == .noAccount)
        let id = try await signUp(h, "off@example.com")
        _ = try await h.handlers.admin.setDisabled(SetDisabledRequest(userID: id, disabled: true))
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "off@example.com", locale: "en") == .noAccount)
        #expect(try await outbox(h).isEmpty)
        #expect(try await storage(h).probes.passwordResetCount(userID: UserID(id)) == 0)
        await expectCode(.invalidEmail) {
            try await h.caller.call(IdentityAPI.requestPasswordReset, PasswordResetRequest(email: "not an email"))
        }
        // The answer for an unknown address is the same as for a known one.
        _ = try await h.caller.call(IdentityAPI.requestPasswordReset, PasswordResetRequest(email: "nobody@example.com"))
    }

    @Test("per address: one mail a minute, five an hour; extra requests write nothing", arguments: StoreKind.kept)
    func perAddressLimit(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        _ = try await signUp(h, "lim@example.com")
        let send = { await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "lim@example.com", locale: "en") }
        #expect(await send() == .queued)
        h.clock.advance(by: 30)
        #expect(await send() == .limited)
        for _ in 0..<4 {
            h.clock.advance(by: 61)
            #expect(await send() == .queued)
        }
        h.clock.advance(by: 61)
        #expect(await send() == .limited)  // five in the last hour
        #expect(try await outbox(h).count == 5)
        h.clock.advance(by: 3600)
        #expect(await send() == .queued)
    }

    @Test("the RPC answers before the work; the mail follows, in Japanese for ja, with the link when a base is set", arguments: StoreKind.kept)
    func requestThroughRPC(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        _ = try await signUp(h, "ja@example.com")
        var handlers = h.handlers
        handlers.passwordReset.appName = "Sakura"
        handlers.passwordReset.linkBase = "https://app.example.com/auth"
        handlers.passwordReset.ttl = 1800
        let caller = LocalCaller(router: handlers.router())
        _ = try await caller.call(IdentityAPI.requestPasswordReset, PasswordResetRequest(email: "JA@example.com", locale: "ja-JP"))
        try await waitUntil("the reset mail is queued") { try await outbox(h).count == 1 }
        let mail = try #require(try await outbox(h).first)
        #expect(mail.subject == "Sakura のパスワード再設定")
        let code = try #require(mail.code)
        #expect(mail.text.contains("30 分間"))
        #expect(mail.text.contains("https://app.example.com/auth?mode=resetPassword&code=\(code)"))
        #expect(try #require(mail.html).contains("https://app.example.com/auth?mode=resetPassword&amp;code=\(code)"))
    }

    @Test("a password the policy refuses: weak_password, and the code stays usable", arguments: StoreKind.kept)
    func weakPasswordKeepsTheCode(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        _ = try await signUp(h, "weak@example.com")
        _ = await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "weak@example.com", locale: "en")
        let code = try #require(try await outbox(h).first?.code)
        await expectCode(.weakPassword) { try await confirm(h, code, "short") }
        #expect(h.tokens.revocations.isEmpty)
        _ = try await confirm(h, code, fresh)
        _ = try await signIn(h, "weak@example.com", fresh)
    }

    @Test("locale choice: ja and ja-JP give ja, anything else en")
    func locales() {
        #expect(MailTemplates.builtIn.locale("ja") == "ja")
        #expect(MailTemplates.builtIn.locale("JA-jp") == "ja")
        #expect(MailTemplates.builtIn.locale("fr") == "en")
        #expect(MailTemplates.builtIn.locale("") == "en")
    }
}
