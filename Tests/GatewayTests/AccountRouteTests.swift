import Foundation
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IdentityCore
import IdentityService
import JWTKit
import Testing
import TokenService

@testable import Gateway
import IdentityPorts

/// `POST /v1/me/reauthenticate`, `PUT /v1/me/password` and `DELETE /v1/me` (`PUT /v1/me/email`: EmailChangeRouteTests)
/// over the real identity and token services in process, on the harness's manual clock
/// (recent-login window 300 s).
@Suite("Account changes and deletion")
struct AccountRouteTests {
    static let pw = "correct horse battery"
    static let newPW = "saffron kettle obelisk"

    func access(_ session: [String: Any]) -> String { session["accessToken"] as? String ?? "" }
    func refresh(_ session: [String: Any]) -> String { session["refreshToken"] as? String ?? "" }

    func signIn(_ h: Harness, _ email: String, _ password: String = pw) async throws -> TestResponse {
        try await h.request(.post, "/v1/sessions", json: #"{"email":"\#(email)","password":"\#(password)"}"#)
    }

    @Test("A24: past the window a password change is requires_recent_login; another user's credentials are user_mismatch; re-authenticating replaces the session and the change then revokes the others")
    func recentLoginGate() async throws {
        try await Harness.run { h in
            let (user, first) = try await h.signUp("u@example.com")
            _ = try await h.signUp("v@example.com", password: Self.newPW)
            let signedIn = try await signIn(h, "u@example.com")
            let second = try #require(try signedIn.object()["session"] as? [String: Any])
            h.clock.advance(by: 301)

            let stale = try await h.request(.put, "/v1/me/password", json: #"{"password":"\#(Self.newPW)"}"#, token: access(first))
            let problem = try stale.expectProblem(.forbidden, "requires_recent_login")
            #expect(problem["maxAgeSeconds"] as? Int == 300)

            let mismatch = try await h.request(
                .post, "/v1/me/reauthenticate", json: #"{"email":"v@example.com","password":"\#(Self.newPW)"}"#, token: access(first))
            try mismatch.expectProblem(.forbidden, "user_mismatch")
            let wrong = try await h.request(.post, "/v1/me/reauthenticate", json: #"{"password":"not the password"}"#, token: access(first))
            try wrong.expectProblem(.unauthorized, "invalid_credentials")
            #expect(try await h.request(.get, "/v1/me", token: access(first)).status == .ok)

            let reauth = try await h.request(.post, "/v1/me/reauthenticate", json: #"{"password":"\#(Self.pw)"}"#, token: access(first))
            #expect(reauth.status == .ok)
            #expect(reauth.headers[.cacheControl] == "no-store")
            let body = try reauth.object()
            #expect((body["user"] as? [String: Any])?["id"] as? String == user["id"] as? String)
            let current = try #require(body["session"] as? [String: Any])
            let claims = try await JWTKeyCollection().unverified(access(current), as: AccessTokenClaims.self)
            #expect(claims.authTime == Date(timeIntervalSince1970: h.clock.now.timeIntervalSince1970.rounded(.down)))
            #expect(claims.amr == ["pwd"])
            // The presented session is replaced: its access and refresh tokens are refused at once.
            #expect(try await h.request(.get, "/v1/me", token: access(first)).status == .unauthorized)
            let oldRefresh = try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh(first))"}"#)
            #expect(oldRefresh.status == .unauthorized)

            let changed = try await h.request(.put, "/v1/me/password", json: #"{"password":"\#(Self.newPW)"}"#, token: access(current))
            #expect(changed.status == .ok)
            #expect(try changed.object()["id"] as? String == user["id"] as? String)
            // The other session is revoked at once; the current one continues.
            #expect(try await h.request(.get, "/v1/me", token: access(second)).status == .unauthorized)
            #expect(try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh(second))"}"#).status == .unauthorized)
            #expect(try await h.request(.get, "/v1/me", token: access(current)).status == .ok)
            #expect(try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh(current))"}"#).status == .ok)
            try await signIn(h, "u@example.com").expectProblem(.unauthorized, "invalid_credentials")
            #expect(try await signIn(h, "u@example.com", Self.newPW).status == .ok)
            #expect(h.services.lastRequest(TokenAPI.revokeAllSessions) == nil)  // the identity service revoked them
        }
    }

    @Test("A27: a provider-only user sets a password after a recent login: providers [google.com, password], and email sign-in works")
    func providerOnlySetsPassword() async throws {
        try await Harness.run { h in
            let store = h.services.identityHandlers.store
            let record = UserRecord(id: .random(), email: try EmailAddress("g@example.com"), createdAt: h.clock.now)
            try await store.insert(record)
            try await store.linkIdentity(provider: "google.com", subject: "google-sub-1", to: record.id, at: h.clock.now)
            let stored = try #require(try await store.user(id: record.id))
            let tokens = try await h.services.token.issueSession(
                IssueSessionRequest(userID: record.id.rawValue, claims: stored.claims, amr: ["fed"], authTime: h.clock.now, client: ClientInfo()))
            try await signIn(h, "g@example.com").expectProblem(.unauthorized, "invalid_credentials")
            // It cannot re-authenticate with a password it does not have.
            let reauth = try await h.request(.post, "/v1/me/reauthenticate", json: #"{"password":"\#(Self.pw)"}"#, token: tokens.accessToken)
            try reauth.expectProblem(.unauthorized, "invalid_credentials")
            let set = try await h.request(.put, "/v1/me/password", json: #"{"password":"\#(Self.pw)"}"#, token: tokens.accessToken)
            #expect(set.status == .ok)
            #expect(try set.object()["providers"] as? [String] == ["google.com", "password"])
            #expect(try await signIn(h, "g@example.com").status == .ok)
            let me = try await h.request(.get, "/v1/me", token: tokens.accessToken)
            #expect(try me.object()["providers"] as? [String] == ["google.com", "password"])
        }
    }

    @Test("A29: deletion after a recent login: 204, every token refused at once, the email registers again; stale: requires_recent_login; continueAnonymously: 201 with a fresh anonymous session")
    func deleteAccount() async throws {
        try await Harness.run { h in
            let (_, first) = try await h.signUp("d@example.com")
            let signedIn = try await signIn(h, "d@example.com")
            let second = try #require(try signedIn.object()["session"] as? [String: Any])
            h.clock.advance(by: 301)
            try await h.request(.delete, "/v1/me", token: access(first)).expectProblem(.forbidden, "requires_recent_login")
            try await h.request(.delete, "/v1/me?continueAnonymously=maybe", token: access(first))
                .expectProblem(.unprocessableContent, "invalid_argument")
            let reauth = try await h.request(.post, "/v1/me/reauthenticate", json: #"{"password":"\#(Self.pw)"}"#, token: access(second))
            let current = try #require(try reauth.object()["session"] as? [String: Any])
            let deleted = try await h.request(.delete, "/v1/me", token: access(current))
            #expect(deleted.status == .noContent)
            for token in [access(first), access(second), access(current)] {
                #expect(try await h.request(.get, "/v1/me", token: token).status == .unauthorized)
            }
            for token in [refresh(first), refresh(current)] {
                #expect(try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(token)"}"#).status == .unauthorized)
            }
            try await signIn(h, "d@example.com").expectProblem(.unauthorized, "invalid_credentials")
            _ = try await h.signUp("d@example.com")

            // Reset to anonymous, in the same call.
            let (_, other) = try await h.signUp("r@example.com")
            let continued = try await h.request(.delete, "/v1/me?continueAnonymously=true", token: access(other))
            #expect(continued.status == .created)
            let body = try continued.object()
            let anonymous = try #require(body["user"] as? [String: Any])
            #expect(anonymous["isAnonymous"] as? Bool == true)
            let anonymousSession = try #require(body["session"] as? [String: Any])
            #expect(try await h.request(.get, "/v1/me", token: access(anonymousSession)).status == .ok)
            #expect(try await h.request(.get, "/v1/me", token: access(other)).status == .unauthorized)

            // An anonymous user needs no recent login (it cannot re-authenticate).
            h.clock.advance(by: 301)  // past the window, within the access token's lifetime
            #expect(try await h.request(.delete, "/v1/me", token: access(anonymousSession)).status == .noContent)
        }
    }

    @Test("an anonymous user cannot set a password or an email here: invalid_argument pointing at the upgrade")
    func anonymousCredentialChanges() async throws {
        try await Harness.run { h in
            let created = try await h.request(.post, "/v1/accounts/anonymous")
            let session = try #require(try created.object()["session"] as? [String: Any])
            let password = try await h.request(.put, "/v1/me/password", json: #"{"password":"\#(Self.pw)"}"#, token: access(session))
            let problem = try password.expectProblem(.unprocessableContent, "invalid_argument")
            #expect((problem["detail"] as? String)?.contains("/v1/me/upgrade") == true)
            try await h.request(.put, "/v1/me/email", json: #"{"email":"a@example.com"}"#, token: access(session))
                .expectProblem(.unprocessableContent, "invalid_argument")
            try await h.request(.post, "/v1/me/reauthenticate", json: #"{"password":"\#(Self.pw)"}"#, token: access(session))
                .expectProblem(.unauthorized, "invalid_credentials")
        }
    }

    @Test("A31: signing out twice, or deleting twice, never answers 5xx: the second call's token is refused with 401")
    func twice() async throws {
        try await Harness.run { h in
            let (_, session) = try await h.signUp("t@example.com")
            #expect(try await h.request(.delete, "/v1/sessions/current", token: access(session)).status == .noContent)
            #expect(try await h.request(.delete, "/v1/sessions/current", token: access(session)).status == .unauthorized)
            let signedIn = try await signIn(h, "t@example.com")
            let again = try #require(try signedIn.object()["session"] as? [String: Any])
            #expect(try await h.request(.delete, "/v1/me", token: access(again)).status == .noContent)
            #expect(try await h.request(.delete, "/v1/me", token: access(again)).status == .unauthorized)
            #expect(try await h.request(.delete, "/v1/sessions/current", token: access(again)).status == .unauthorized)
        }
    }

    @Test("bad input: no bearer 401, a missing or empty password, a body that is not JSON")
    func badInput() async throws {
        try await Harness.run { h in
            let (_, session) = try await h.signUp("b@example.com")
            try await h.request(.put, "/v1/me/password", json: #"{"password":"\#(Self.newPW)"}"#).expectProblem(.unauthorized, "unauthenticated")
            try await h.request(.delete, "/v1/me").expectProblem(.unauthorized, "unauthenticated")
            try await h.request(.put, "/v1/me/password", json: #"{}"#, token: access(session)).expectProblem(.badRequest, "malformed_request")
            try await h.request(.put, "/v1/me/password", json: #"{"password":""}"#, token: access(session))
                .expectProblem(.unprocessableContent, "invalid_argument")
            try await h.request(.put, "/v1/me/password", json: #"{"password":"abc"}"#, token: access(session))
                .expectProblem(.unprocessableContent, "weak_password")
            try await h.request(.post, "/v1/me/reauthenticate", json: #"{"email":"","password":"x"}"#, token: access(session))
                .expectProblem(.unprocessableContent, "invalid_email")
            try await h.request(.post, "/v1/me/reauthenticate", json: "nope", token: access(session)).expectProblem(.badRequest, "malformed_request")
        }
    }
}
