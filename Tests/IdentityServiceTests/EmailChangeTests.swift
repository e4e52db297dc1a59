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

/// The confirmed email change (issue 19 §4) through the handlers, on SQLite and PostgreSQL and a
/// manual clock: the request mails the new address, the confirmation applies it and mails the
/// old address a revert code, the revert restores the old address and revokes every session.
@Suite("Identity: confirmed email change")
struct EmailChangeTests {
    let strong = "glacier lantern marmalade"

    func storage(_ h: Harness) throws -> any IdentityStorage { identityStorage(h.store) }

    func outbox(_ h: Harness, _ kind: String) async throws -> [MailMessage] { try await queuedMails(in: storage(h), kind: kind) }

    /// The code of the last mail of `kind`.
    func lastCode(_ h: Harness, _ kind: String) async throws -> String {
        try #require(try await outbox(h, kind).last?.code)
    }

    func signUp(_ h: Harness, _ email: String) async throws -> AuthenticatedCaller {
        let reply = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: email, password: strong))
        return AuthenticatedCaller(userID: reply.user.id, sessionID: "sid-of-\(email)", authTime: h.clock.now)
    }

    func change(_ h: Harness, _ me: AuthenticatedCaller, _ email: String, locale: String = "en") async throws -> CredentialChangeResponse {
        let fresh = AuthenticatedCaller(userID: me.userID, sessionID: me.sessionID, authTime: h.clock.now)
        return try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: fresh, email: email, locale: locale))
    }

    func confirm(_ h: Harness, _ code: String, locale: String = "en") async throws -> EmailCodeResponse {
        try await h.caller.call(IdentityAPI.confirmEmailChange, EmailCodeRequest(code: code, locale: locale))
    }

    func revert(_ h: Harness, _ code: String) async throws -> EmailCodeResponse {
        try await h.caller.call(IdentityAPI.revertEmailChange, EmailCodeRequest(code: code))
    }

    func user(_ h: Harness, _ me: AuthenticatedCaller) async throws -> UserRecord {
        try #require(try await h.store.user(id: UserID(me.userID)))
    }

    @Test("the request changes nothing but mails a code to the new address (only its hash stored, no event); confirming makes the address the user's, verified, publishes user.email_changed and mails the old address a revert code; each code works once", arguments: StoreKind.kept)
    func requestAndConfirm(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "Old@Example.com")
        let before = try await user(h, me)
        let events = h.events.topics.count

        let pending = try await change(h, me, "New@Example.com")
        #expect(pending.pendingEmail == "New@Example.com" && pending.pendingExpiresIn == 3600)
        #expect(pending.user.email == "Old@Example.com" && pending.revokedSessionIDs.isEmpty)
        #expect(try await user(h, me).version == before.version)
        #expect(h.events.topics.count == events)
        let mail = try #require(try await outbox(h, "change_email").first)
        #expect(mail.to == "New@Example.com" && mail.subject == "Confirm your new email address for Gatehouse")
        #expect(mail.text.contains("New@Example.com") && mail.text.contains("60 minutes"))
        let code = try #require(mail.code)
        #expect(try await rawCodeHashes(h.store, table: "email_actions") == [IdentityHandlers.resetCodeHash(code)])
        let stored = try await rawStrings(
            h.store, sqlite: "SELECT email || ' ' || from_email_normalized || ' ' || purpose FROM email_actions",
            postgres: "SELECT email || ' ' || from_email_normalized || ' ' || purpose FROM email_actions")
        #expect(stored == ["New@Example.com old@example.com change_email"])
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "old@example.com", password: strong))

        h.clock.advance(by: 60)
        let confirmed = try await confirm(h, code)
        #expect(confirmed.user.email == "New@Example.com" && confirmed.user.emailVerified)
        #expect(confirmed.revokedSessionIDs.isEmpty && h.tokens.revocations.isEmpty)
        let after = try await user(h, me)
        #expect(after.emailNormalized == "new@example.com" && after.version == before.version + 1)
        #expect(h.events.topics.last == "user.email_changed")
        #expect(try h.events.decoded().last?.event.version == after.version)
        let notice = try #require(try await outbox(h, "email_changed").first)
        #expect(notice.to == "Old@Example.com")
        #expect(notice.text.contains("from Old@Example.com to New@Example.com"))
        let revertCode = try #require(notice.code)
        #expect(revertCode != code)
        #expect(try await storage(h).probes.emailChangeCodeCount(userID: after.id, purpose: .revertEmail, now: h.clock.now) == 1)
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, code) }
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "new@example.com", password: strong))
        await expectCode(.invalidCredentials) { try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "old@example.com", password: strong)) }
        // The revert code works for 7 days.
        h.clock.advance(by: 7 * 86_400 - 1)
        #expect(try await revert(h, revertCode).user.email == "Old@Example.com")
        await expectCode(.invalidEmailChangeCode) { try await revert(h, revertCode) }
    }

    @Test("the revert restores the old address (verified), revokes every session around the write (email_reverted), voids pending change and reset codes; a wrong code revokes nothing", arguments: StoreKind.kept)
    func revert(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "ann@example.com")
        _ = try await change(h, me, "ann.new@example.com")
        _ = try await confirm(h, try await lastCode(h, "change_email"))
        let revertCode = try await lastCode(h, "email_changed")
        h.clock.advance(by: 61)
        _ = try await change(h, me, "ann.third@example.com")
        let pendingCode = try await lastCode(h, "change_email")
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "ann.new@example.com", locale: "en") == .queued)
        let resetCode = try await lastCode(h, "password_reset")

        await expectCode(.invalidEmailChangeCode) { try await revert(h, "not-a-code") }
        await expectCode(.invalidEmailChangeCode) { try await revert(h, IdentityHandlers.newResetCode()) }
        await expectCode(.invalidEmailChangeCode) { try await revert(h, pendingCode) }  // a change code is no revert code
        #expect(h.tokens.revocations.isEmpty)

        let reverted = try await revert(h, revertCode)
        #expect(reverted.user.email == "ann@example.com" && reverted.user.emailVerified)
        #expect(h.tokens.revocations.map(\.reason) == ["email_reverted", "email_reverted"])
        #expect(h.tokens.revocations.allSatisfy { $0.userID == me.userID && $0.exceptSessionID == nil })
        #expect(h.events.topics.last == "user.email_changed")
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, pendingCode) }
        await expectCode(.invalidResetCode) {
            try await h.caller.call(IdentityAPI.confirmPasswordReset, ConfirmPasswordResetRequest(code: resetCode, password: "saffron kettle obelisk"))
        }
        // The password ended with the revert: a reset mail to the restored address sets a new one.
        await expectCode(.invalidCredentials) { try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "ann@example.com", password: strong)) }
        #expect(try await user(h, me).passwordHash == nil)
        let mail = try #require(try await outbox(h, "password_reset").last)
        #expect(mail.to == "ann@example.com")
        let newPassword = "saffron kettle obelisk"
        _ = try await h.caller.call(IdentityAPI.confirmPasswordReset, ConfirmPasswordResetRequest(code: try #require(mail.code), password: newPassword))
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "ann@example.com", password: newPassword))
        // The new address is free again.
        _ = try await signUp(h, "ann.new@example.com")
    }

    @Test("a confirmation voids the user's other change codes, verify codes and password reset codes; a newer request supersedes the older code", arguments: StoreKind.kept)
    func confirmVoidsOtherCodes(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "bo@example.com")
        _ = try await change(h, me, "bo1@example.com")
        let superseded = try await lastCode(h, "change_email")
        h.clock.advance(by: 61)
        _ = try await change(h, me, "bo2@example.com")
        let current = try await lastCode(h, "change_email")
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, superseded) }
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "bo@example.com", locale: "en") == .queued)
        let resetCode = try await lastCode(h, "password_reset")
        let id = UserID(me.userID)
        let verifyHash = IdentityHandlers.resetCodeHash(IdentityHandlers.newResetCode())
        try await storage(h).storeLinkCode(
            .verifyEmail, userID: id, email: "bo@example.com", emailNormalized: "bo@example.com", codeHash: verifyHash,
            expiresAt: Date(timeIntervalSince1970: 4_000_000_000), now: h.clock.now)
        #expect(try await storage(h).probes.emailChangeCodeCount(userID: id, purpose: .verifyEmail, now: h.clock.now) == 1)

        #expect(try await confirm(h, current).user.email == "bo2@example.com")
        #expect(try await storage(h).probes.emailChangeCodeCount(userID: id, purpose: .verifyEmail, now: h.clock.now) == 0)
        #expect(try await storage(h).probes.emailChangeCodeCount(userID: id, purpose: .changeEmail, now: h.clock.now) == 0)
        await expectCode(.invalidResetCode) {
            try await h.caller.call(IdentityAPI.confirmPasswordReset, ConfirmPasswordResetRequest(code: resetCode, password: "saffron kettle obelisk"))
        }
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, superseded) }
    }

    @Test("refused codes: malformed, unknown, expired, a revert code, or one for an address the user no longer has; a disabled user: user_disabled", arguments: StoreKind.kept)
    func refusedCodes(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "cy@example.com")
        _ = try await change(h, me, "cy2@example.com")
        let code = try await lastCode(h, "change_email")
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, "") }
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, String(repeating: "A", count: 43) + "x") }
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, IdentityHandlers.newResetCode()) }
        // The address changed another way (an operator's edit) after the code was made.
        _ = try await h.store.update(id: UserID(me.userID), expectedVersion: nil, now: h.clock.now) { user in
            user.email = "elsewhere@example.com"
            user.emailNormalized = "elsewhere@example.com"
        }
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, code) }

        let dee = try await signUp(h, "dee@example.com")
        _ = try await change(h, dee, "dee2@example.com")
        let expiring = try await lastCode(h, "change_email")
        h.clock.advance(by: 3600)
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, expiring) }

        h.clock.advance(by: 61)
        _ = try await change(h, dee, "dee3@example.com")
        let disabledCode = try await lastCode(h, "change_email")
        _ = try await h.handlers.admin.setDisabled(SetDisabledRequest(userID: dee.userID, disabled: true))
        await expectCode(.userDisabled) { try await confirm(h, disabledCode) }
        #expect(try await user(h, dee).email == "dee@example.com")
    }

    @Test("taken meanwhile: confirming when the new address got an account is email_exists and the code stays usable; the old address is reserved for its owner until the revert code is used: sign-up and changes to it are email_exists, the revert works", arguments: StoreKind.kept)
    func takenMeanwhile(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "eve@example.com")
        _ = try await change(h, me, "eve2@example.com")
        let code = try await lastCode(h, "change_email")
        let squatter = try await signUp(h, "EVE2@example.com")
        await expectCode(.emailExists) { try await confirm(h, code) }
        _ = try await h.caller.call(IdentityAPI.deleteUser, UserIDRequest(userID: squatter.userID))
        #expect(try await confirm(h, code).user.email == "eve2@example.com")
        let revocations = h.tokens.revocations.count  // the squatter's deletion

        let revertCode = try await lastCode(h, "email_changed")
        // Whoever took the account cannot register the old address to make the revert fail.
        await expectCode(.emailExists) { _ = try await signUp(h, "EVE@example.com") }
        let other = try await signUp(h, "eve.other@example.com")
        await expectCode(.emailExists) { _ = try await change(h, other, "eve@example.com") }
        #expect(try await revert(h, revertCode).user.email == "eve@example.com")
        #expect(h.tokens.revocations.count > revocations)
        // Used, the code reserves nothing: the address is simply its owner's again.
        await expectCode(.emailExists) { _ = try await signUp(h, "eve@example.com") }
    }

    @Test("a password change or reset voids a pending email change: a change asked from a session the new password ends cannot complete after it", arguments: StoreKind.kept)
    func passwordEndsPendingChange(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "fay@example.com")
        _ = try await change(h, me, "fay.attacker@example.com")
        let pending = try await lastCode(h, "change_email")
        _ = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: me, password: "saffron kettle obelisk"))
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, pending) }

        h.clock.advance(by: 61)
        _ = try await change(h, me, "fay.attacker2@example.com")
        let pending2 = try await lastCode(h, "change_email")
        #expect(await h.handlers.passwordResets.sendPasswordReset(normalizedEmail: "fay@example.com", locale: "en") == .queued)
        let reset = try await lastCode(h, "password_reset")
        _ = try await h.caller.call(IdentityAPI.confirmPasswordReset, ConfirmPasswordResetRequest(code: reset, password: "another fine passphrase"))
        await expectCode(.invalidEmailChangeCode) { try await confirm(h, pending2) }
        #expect(try await user(h, me).email == "fay@example.com")
    }

    @Test("chained changes A→B→C: the revert to B does not disarm A's; A's revert voids B's", arguments: StoreKind.kept)
    func chainedReverts(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "a@example.com")
        _ = try await change(h, me, "b@example.com")
        _ = try await confirm(h, try await lastCode(h, "change_email"))
        let toA = try await lastCode(h, "email_changed")
        h.clock.advance(by: 61)
        _ = try await change(h, me, "c@example.com")
        _ = try await confirm(h, try await lastCode(h, "change_email"))
        let toB = try await lastCode(h, "email_changed")
        #expect(try await outbox(h, "email_changed").map(\.to) == ["a@example.com", "b@example.com"])

        #expect(try await revert(h, toB).user.email == "b@example.com")
        #expect(try await revert(h, toA).user.email == "a@example.com")

        // Again the other way round: A's revert first voids the later one.
        h.clock.advance(by: 61)
        _ = try await change(h, me, "b2@example.com")
        _ = try await confirm(h, try await lastCode(h, "change_email"))
        let toA2 = try await lastCode(h, "email_changed")
        h.clock.advance(by: 61)
        _ = try await change(h, me, "c2@example.com")
        _ = try await confirm(h, try await lastCode(h, "change_email"))
        let toB2 = try await lastCode(h, "email_changed")
        #expect(try await revert(h, toA2).user.email == "a@example.com")
        await expectCode(.invalidEmailChangeCode) { try await revert(h, toB2) }
    }

    @Test("the same address: nothing happens; only its case: applied at once, no mail; per user one change mail a minute and five an hour, then rate_limited with retryAfter", arguments: StoreKind.kept)
    func noOpsAndLimits(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "fay@example.com")
        let version = try await user(h, me).version
        let same = try await change(h, me, "fay@example.com")
        #expect(same.pendingEmail == nil && same.user.email == "fay@example.com")
        #expect(try await user(h, me).version == version)
        let cased = try await change(h, me, "Fay@Example.com")
        #expect(cased.pendingEmail == nil && cased.user.email == "Fay@Example.com")
        #expect(h.events.topics.last == "user.email_changed")
        #expect(try await outbox(h, "change_email").isEmpty)
        // Equal only after Unicode folding (full-width letters): maybe another mailbox, so confirmed like any change.
        let folded = try await change(h, me, "ｆａｙ@example.com")
        #expect(folded.pendingEmail == "ｆａｙ@example.com" && folded.user.email == "Fay@Example.com")
        #expect(try await outbox(h, "change_email").count == 1)
        h.clock.advance(by: 3601)  // out of the limits' windows

        _ = try await change(h, me, "fay1@example.com")
        h.clock.advance(by: 20)
        do {
            _ = try await change(h, me, "fay2@example.com")
            Issue.record("a second change mail within a minute")
        } catch let error as RPCError {
            #expect(error.code == .rateLimited)
            #expect(error.details[RPCError.retryAfterKey] == "40")
        }
        for n in 2...5 {
            h.clock.advance(by: 61)
            _ = try await change(h, me, "fay\(n)@example.com")
        }
        h.clock.advance(by: 61)
        await expectCode(.rateLimited) { try await change(h, me, "fay6@example.com") }
        #expect(try await outbox(h, "change_email").count == 6)  // 5 in the hour, and the full-width one before it
        h.clock.advance(by: 3600)
        _ = try await change(h, me, "fay6@example.com")
    }

    @Test("bad input: invalid_email, email_exists, an anonymous caller, a stale login; the mails follow the locale", arguments: StoreKind.kept)
    func badInputAndLocale(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let me = try await signUp(h, "gus@example.com")
        _ = try await signUp(h, "taken@example.com")
        await expectCode(.invalidEmail) { try await change(h, me, "not-an-email") }
        await expectCode(.emailExists) { try await change(h, me, "TAKEN@example.com") }
        await expectCode(.invalidArgument) { try await change(h, me, "gus2@example.com", locale: String(repeating: "x", count: 65)) }
        let anonymous = try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest())
        await expectCode(.invalidArgument) { try await change(h, AuthenticatedCaller(userID: anonymous.user.id, sessionID: "s", authTime: h.clock.now), "a@example.com") }
        let stale = AuthenticatedCaller(userID: me.userID, sessionID: me.sessionID, authTime: h.clock.now.addingTimeInterval(-301))
        await expectCode(.requiresRecentLogin) {
            try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: stale, email: "gus2@example.com"))
        }
        #expect(try await outbox(h, "change_email").isEmpty)

        _ = try await change(h, me, "gus2@example.com", locale: "ja-JP,en")
        #expect(try await outbox(h, "change_email").first?.subject == "Gatehouse 新しいメールアドレスの確認")
        _ = try await confirm(h, try await lastCode(h, "change_email"), locale: "ja")
        let notice = try #require(try await outbox(h, "email_changed").first)
        #expect(notice.to == "gus@example.com" && notice.text.contains("gus2@example.com"))
    }
}
