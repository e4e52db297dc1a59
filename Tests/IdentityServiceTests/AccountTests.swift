import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import Mail
import RPCRouting
import Testing

/// The self-service account methods through `LocalCaller`, on a manual clock: the recent-login
/// window, re-authentication, password and email changes, self-deletion.
@Suite("Identity: account changes and deletion")
struct AccountTests {
    let strong = "glacier lantern marmalade"
    let other = "saffron kettle obelisk"

    /// Signs up `email` and returns the caller of its session, authenticated now.
    func signUp(_ h: Harness, _ email: String, password: String? = nil) async throws -> AuthenticatedCaller {
        let reply = try await h.caller.call(IdentityAPI.signUp, SignUpRequest(email: email, password: password ?? strong))
        return AuthenticatedCaller(userID: reply.user.id, sessionID: "sid-of-\(email)", authTime: h.clock.now)
    }

    /// A caller over the same store and fakes with another recent-login window.
    func caller(_ h: Harness, window: TimeInterval) -> LocalCaller {
        var handlers = h.handlers
        handlers.recentLoginWindow = window
        return LocalCaller(router: handlers.router())
    }

    @Test("the window: a change is allowed up to recentLoginWindow seconds after auth_time, refused after with maxAgeSeconds; 0 refuses always")
    func recentLoginWindow() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let me = try await signUp(h, "win@example.com")
        #expect(h.handlers.recentLoginWindow == 300)
        h.clock.advance(by: 300)
        _ = try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: me, email: "win2@example.com"))
        h.clock.advance(by: 1)
        do {
            _ = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: me, password: other))
            Issue.record("a stale login changed the password")
        } catch let error as RPCError {
            #expect(error.code == .requiresRecentLogin)
            #expect(error.details["maxAgeSeconds"] == "300")
        }
        await expectCode(.requiresRecentLogin) { try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: me, email: "w3@example.com")) }
        await expectCode(.requiresRecentLogin) { try await h.caller.call(IdentityAPI.deleteAccount, DeleteAccountRequest(caller: me)) }
        #expect(try await h.store.user(id: UserID(me.userID)) != nil)
        // A longer window lets the same caller through; a window of 0 lets nobody through.
        _ = try await caller(h, window: 3600).call(IdentityAPI.changePassword, ChangePasswordRequest(caller: me, password: other))
        let fresh = AuthenticatedCaller(userID: me.userID, sessionID: me.sessionID, authTime: h.clock.now)
        await expectCode(.requiresRecentLogin) {
            try await caller(h, window: 0).call(IdentityAPI.changePassword, ChangePasswordRequest(caller: fresh, password: strong))
        }
    }

    @Test("re-authentication: a new session with a fresh auth_time, the presented one revoked; another user's credentials: user_mismatch, nothing changes")
    func reauthenticate() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let me = try await signUp(h, "re@example.com")
        _ = try await signUp(h, "them@example.com", password: other)
        h.clock.advance(by: 3600)
        let issuedBefore = h.tokens.requests.count
        await expectCode(.userMismatch) {
            try await h.caller.call(IdentityAPI.reauthenticate, ReauthenticateRequest(caller: me, email: "them@example.com", password: other))
        }
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.reauthenticate, ReauthenticateRequest(caller: me, password: "wrong password here"))
        }
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.reauthenticate, ReauthenticateRequest(caller: me, email: "nobody@example.com", password: strong))
        }
        #expect(h.tokens.requests.count == issuedBefore)
        #expect(h.tokens.sessionRevocations.isEmpty)
        let reply = try await h.caller.call(
            IdentityAPI.reauthenticate, ReauthenticateRequest(caller: me, password: strong, client: ClientInfo(userAgent: "ua", ip: "10.0.0.9")))
        #expect(reply.user.id == me.userID)
        let issued = try #require(h.tokens.requests.last)
        #expect(issued.userID == me.userID && issued.amr == ["pwd"] && issued.authTime == h.clock.now && issued.client.ip == "10.0.0.9")
        #expect(h.tokens.sessionRevocations == [RevokeSessionRequest(sessionID: me.sessionID, reason: "reauthenticated")])
        // With the new session's auth_time, the gated changes pass again.
        let fresh = AuthenticatedCaller(userID: me.userID, sessionID: reply.tokens.sessionID, authTime: issued.authTime)
        _ = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: fresh, password: other))
    }

    @Test("re-authentication of a user without a password (anonymous, provider-only) is invalid_credentials; failures are throttled like sign-in")
    func reauthenticateWithoutPassword() async throws {
        let h = try await Harness(throttle: PasswordAttemptThrottle.Settings(threshold: 2))
        defer { h.cleanup() }
        let anonymous = try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest())
        let anonymousCaller = AuthenticatedCaller(userID: anonymous.user.id, sessionID: "sid-a", authTime: h.clock.now)
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.reauthenticate, ReauthenticateRequest(caller: anonymousCaller, password: strong))
        }
        let provider = try makeUser("google-only@example.com", at: h.clock.now, hash: nil)
        try await h.store.insert(provider)
        let providerCaller = AuthenticatedCaller(userID: provider.id.rawValue, sessionID: "sid-p", authTime: h.clock.now)
        await expectCode(.invalidCredentials) {
            try await h.caller.call(IdentityAPI.reauthenticate, ReauthenticateRequest(caller: providerCaller, password: strong))
        }
        let me = try await signUp(h, "thr@example.com")
        for _ in 0..<2 {
            await expectCode(.invalidCredentials) {
                try await h.caller.call(IdentityAPI.reauthenticate, ReauthenticateRequest(caller: me, password: "not the password"))
            }
        }
        await expectCode(.tooManyAttempts) {
            try await h.caller.call(IdentityAPI.reauthenticate, ReauthenticateRequest(caller: me, password: strong))
        }
        // The same keys as sign-in: sign-in with that email waits too.
        await expectCode(.tooManyAttempts) { try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "thr@example.com", password: strong)) }
    }

    @Test("password change: policy applies, the old password stops working, every other session is revoked, the current one is kept")
    func changePassword() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let me = try await signUp(h, "pw@example.com")
        do {
            _ = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: me, password: "Password"))
            Issue.record("a weak password was accepted")
        } catch let error as RPCError {
            #expect(error.code == .weakPassword)
            #expect(error.details["reasons"] == "common_password")
        }
        let reply = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: me, password: other))
        #expect(reply.user.providers == ["password"])
        // Revoked before the new hash is written and again after it (a racing sign-in's session).
        #expect(h.tokens.revocations == Array(repeating: UserSessionsRequest(userID: me.userID, reason: "password_changed", exceptSessionID: me.sessionID), count: 2))
        await expectCode(.invalidCredentials) { try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "pw@example.com", password: strong)) }
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "pw@example.com", password: other))
        #expect(h.events.topics.last == IdentityAPI.Topic.userUpdated)
    }

    @Test("a provider-only user sets a password: providers gain password and email sign-in works; an anonymous user is told to upgrade")
    func setPassword() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let provider = try makeUser("g@example.com", at: h.clock.now, hash: nil)
        try await h.store.insert(provider)
        try await h.store.linkIdentity(provider: "google.com", subject: "g-123", to: provider.id, at: h.clock.now)
        let me = AuthenticatedCaller(userID: provider.id.rawValue, sessionID: "sid-g", authTime: h.clock.now)
        let reply = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: me, password: strong))
        #expect(reply.user.providers == ["google.com", "password"])
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "g@example.com", password: strong))

        let anonymous = try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest())
        let anonymousCaller = AuthenticatedCaller(userID: anonymous.user.id, sessionID: "sid-a", authTime: h.clock.now)
        do {
            _ = try await h.caller.call(IdentityAPI.changePassword, ChangePasswordRequest(caller: anonymousCaller, password: strong))
            Issue.record("an anonymous user set a password")
        } catch let error as RPCError {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("/v1/me/upgrade"))
        }
        await expectCode(.invalidArgument) {
            try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: anonymousCaller, email: "a@example.com"))
        }
    }

    @Test("email change (confirmed since issue 19 §4): invalid_email, email_exists; a free address is pending until the mailed code confirms it, then verified, user.email_changed, sign-in with it")
    func changeEmail() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let me = try await signUp(h, "old@example.com")
        _ = try await signUp(h, "taken@example.com")
        await expectCode(.invalidEmail) { try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: me, email: "not-an-email")) }
        await expectCode(.emailExists) { try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: me, email: "TAKEN@example.com")) }
        let reply = try await h.caller.call(IdentityAPI.changeEmail, ChangeEmailRequest(caller: me, email: "New@Example.com"))
        #expect(reply.user.email == "old@example.com" && reply.pendingEmail == "New@Example.com")
        #expect(reply.revokedSessionIDs.isEmpty)
        #expect(h.events.topics.last != "user.email_changed")
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "old@example.com", password: strong))
        let sqlite = try #require(h.store as? SQLiteUserStore)
        let mail = try #require(try await sqlite.outboxEntries().last?.message)
        #expect(mail.kind == "change_email" && mail.to == "New@Example.com")
        let code = try #require(resetCode(in: mail.text))
        let confirmed = try await h.caller.call(IdentityAPI.confirmEmailChange, EmailCodeRequest(code: code))
        #expect(confirmed.user.email == "New@Example.com" && confirmed.user.emailVerified)
        #expect(h.events.topics.last == "user.email_changed")
        #expect(try h.events.decoded().last?.event.userID == me.userID)
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "new@example.com", password: strong))
        await expectCode(.invalidCredentials) { try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "old@example.com", password: strong)) }
        // The old address stays reserved for its owner while the revert code mailed to it lives.
        await expectCode(.emailExists) { _ = try await signUp(h, "old@example.com") }
    }

    @Test("deletion: the user is gone, its sessions revoked (user_deleted), user.deleted; a retry succeeds and publishes again; an anonymous user needs no recent login and may continue anonymously")
    func deleteAccount() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let me = try await signUp(h, "del@example.com")
        let reply = try await h.caller.call(IdentityAPI.deleteAccount, DeleteAccountRequest(caller: me))
        #expect(reply.anonymous == nil)
        #expect(try await h.store.user(id: UserID(me.userID)) == nil)
        // Revoked before the row is deleted and again after it (a racing sign-in's session).
        #expect(h.tokens.revocations == Array(repeating: UserSessionsRequest(userID: me.userID, reason: "user_deleted"), count: 2))
        #expect(h.events.topics.last == IdentityAPI.Topic.userDeleted)
        let events = h.events.topics.count
        _ = try await h.caller.call(IdentityAPI.deleteAccount, DeleteAccountRequest(caller: me))
        #expect(h.tokens.revocations.count == 3)
        // A retry (its first answer lost, or its revocation failed after the delete) publishes
        // user.deleted again: at least once.
        #expect(h.events.topics.count == events + 1)
        // The email can register again.
        _ = try await signUp(h, "del@example.com")

        let anonymous = try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest())
        h.clock.advance(by: 86_400)
        let stale = AuthenticatedCaller(userID: anonymous.user.id, sessionID: "sid-a", authTime: h.clock.now.addingTimeInterval(-86_400))
        let continued = try await h.caller.call(IdentityAPI.deleteAccount, DeleteAccountRequest(caller: stale, continueAnonymously: true))
        let fresh = try #require(continued.anonymous)
        #expect(fresh.user.isAnonymous && fresh.user.id != anonymous.user.id)
        #expect(try await h.store.user(id: UserID(anonymous.user.id)) == nil)
        #expect(h.tokens.requests.last?.amr == ["anon"])
    }
}
