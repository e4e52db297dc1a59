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

@testable import Gateway
import IdentityPorts

/// `POST /v1/me/upgrade`, `POST /v1/sessions` with an anonymous bearer token, and
/// `POST /v1/sessions/resume`, over the real identity and token services in process.
@Suite("Upgrade and migration of anonymous users")
struct AnonymousMigrationTests {
    static let password = "correct horse battery"

    /// A new anonymous user: its id, access token and refresh token.
    func anonymous(_ h: Harness) async throws -> (id: String, access: String, refresh: String) {
        let r = try await h.request(.post, "/v1/accounts/anonymous")
        #expect(r.status == .created)
        let body = try r.object()
        let session = try #require(body["session"] as? [String: Any])
        return (
            try #require((body["user"] as? [String: Any])?["id"] as? String), try #require(session["accessToken"] as? String),
            try #require(session["refreshToken"] as? String)
        )
    }

    func claims(_ token: String) async throws -> AccessTokenClaims {
        try await JWTKeyCollection().unverified(token, as: AccessTokenClaims.self)
    }

    func signInBody(_ email: String, _ password: String = Self.password, allowMigration: String? = nil) -> String {
        let decision = allowMigration.map { #","allowMigration":\#($0)"# } ?? ""
        return #"{"email":"\#(email)","password":"\#(password)"\#(decision)}"#
    }

    @Test("A15: upgrade keeps the id, isAnonymous false, providers [password], a new password session; the old session stays valid and refreshes to the new state")
    func upgrade() async throws {
        try await Harness.run { h in
            let a = try await anonymous(h)
            let r = try await h.request(
                .post, "/v1/me/upgrade", json: #"{"email":"ann@example.com","password":"\#(Self.password)","displayName":"Ann"}"#, token: a.access)
            #expect(r.status == .ok, "\(r.text)")
            #expect(r.headers[.cacheControl] == "no-store")
            let user = try #require(try r.object()["user"] as? [String: Any])
            #expect(user["id"] as? String == a.id)
            #expect(user["isAnonymous"] as? Bool == false)
            #expect(user["providers"] as? [String] == ["password"])
            #expect(user["email"] as? String == "ann@example.com")
            let access = try #require((try r.object()["session"] as? [String: Any])?["accessToken"] as? String)
            let fresh = try await claims(access)
            #expect(fresh.sub == a.id && fresh.amr == ["pwd"] && fresh.isAnonymous != true && fresh.email == "ann@example.com")
            let anonymousSID = try await claims(a.access).sid
            #expect(fresh.sid != anonymousSID)
            // The anonymous session stays valid, and its next access token shows the new state.
            #expect(try await h.request(.get, "/v1/me", token: a.access).status == .ok)
            let refreshed = try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(a.refresh)"}"#)
            #expect(refreshed.status == .ok)
            let next = try #require((try refreshed.object()["session"] as? [String: Any])?["accessToken"] as? String)
            #expect(try await claims(next).isAnonymous != true)
            #expect(try await claims(next).email == "ann@example.com")
            // And the new credentials sign in to the same user.
            let signIn = try await h.request(.post, "/v1/sessions", json: signInBody("ann@example.com"))
            #expect((try signIn.object()["user"] as? [String: Any])?["id"] as? String == a.id)
        }
    }

    @Test("upgrade errors: no bearer 401, email_exists 409 (nothing changes), weak_password 422, a user who is not anonymous 422")
    func upgradeErrors() async throws {
        try await Harness.run { h in
            let b = try await h.signUp("bea@example.com")
            let a = try await anonymous(h)
            let body = #"{"email":"BEA@example.com","password":"\#(Self.password)"}"#
            try await h.request(.post, "/v1/me/upgrade", json: body).expectProblem(.unauthorized, "unauthenticated")
            try await h.request(.post, "/v1/me/upgrade", json: body, token: a.access).expectProblem(.conflict, "email_exists")
            try await h.request(.post, "/v1/me/upgrade", json: #"{"email":"new@example.com","password":"abc"}"#, token: a.access)
                .expectProblem(.unprocessableContent, "weak_password")
            #expect(try await h.request(.get, "/v1/me", token: a.access).object()["isAnonymous"] as? Bool == true)
            let bAccess = try #require(b.session["accessToken"] as? String)
            let refused = try await h.request(.post, "/v1/me/upgrade", json: #"{"email":"x@example.com","password":"\#(Self.password)"}"#, token: bAccess)
            let problem = try refused.expectProblem(.unprocessableContent, "invalid_argument")
            #expect((problem["detail"] as? String)?.contains("/v1/me/password") == true)
        }
    }

    @Test("A23 and A20: an anonymous caller gets user_not_found for an unknown email and invalid_credentials for a wrong password; A keeps working")
    func unknownEmailAndWrongPassword() async throws {
        try await Harness.run { h in
            _ = try await h.signUp("bea@example.com")
            let a = try await anonymous(h)
            try await h.request(.post, "/v1/sessions", json: signInBody("nobody@example.com"), token: a.access)
                .expectProblem(.notFound, "user_not_found")
            // Without the bearer token, the usual answer that reveals nothing.
            try await h.request(.post, "/v1/sessions", json: signInBody("nobody@example.com")).expectProblem(.unauthorized, "invalid_credentials")
            try await h.request(.post, "/v1/sessions", json: signInBody("bea@example.com", "wrong password!", allowMigration: "true"), token: a.access)
                .expectProblem(.unauthorized, "invalid_credentials")
            #expect(try await h.request(.get, "/v1/me", token: a.access).object()["id"] as? String == a.id)
            #expect(try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(a.refresh)"}"#).status == .ok)
        }
    }

    @Test("A17 then A18: migration_required names both users and a handle; resume deletes A, whose tokens are refused before the answer")
    func migrationRequiredThenResume() async throws {
        try await Harness.run { h in
            let b = try await h.signUp("bea@example.com")
            let bID = try #require(b.user["id"] as? String)
            let a = try await anonymous(h)
            let required = try await h.request(.post, "/v1/sessions", json: signInBody("bea@example.com"), token: a.access)
            let problem = try required.expectProblem(.conflict, "migration_required")
            #expect(problem["anonymousUserId"] as? String == a.id)
            #expect(problem["existingUserId"] as? String == bID)
            #expect(problem["resumeHandleExpiresIn"] as? Int == 300)
            let handle = try #require(problem["resumeHandle"] as? String)
            // A is still there and its session works.
            #expect(try await h.request(.get, "/v1/me", token: a.access).status == .ok)
            // The token service's events are lost: only the gateway's own insertion can refuse A's tokens.
            h.services.dropEvents(true)
            let resumed = try await h.request(
                .post, "/v1/sessions/resume", json: #"{"resumeHandle":"\#(handle)","allowMigration":true}"#, token: a.access)
            #expect(resumed.status == .ok, "\(resumed.text)")
            let body = try resumed.object()
            #expect((body["user"] as? [String: Any])?["id"] as? String == bID)
            let migration = try #require(body["migration"] as? [String: Any])
            #expect(migration["oldUserId"] as? String == a.id)
            #expect(migration["newUserId"] as? String == bID)
            #expect(migration["performMigration"] as? Bool == true)
            #expect(migration.count == 3)  // the revoked session ids stay inside
            let access = try #require((body["session"] as? [String: Any])?["accessToken"] as? String)
            #expect(try await claims(access).sub == bID)
            try await h.request(.get, "/v1/me", token: a.access).expectProblem(.unauthorized, "session_revoked")
            #expect(try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(a.refresh)"}"#).status == .unauthorized)
            #expect(try await h.services.identityHandlers.store.user(id: .init(a.id)) == nil)
            // The handle was used.
            try await h.request(.post, "/v1/sessions/resume", json: #"{"resumeHandle":"\#(handle)","allowMigration":true}"#, token: access)
                .expectProblem(.badRequest, "invalid_resume_handle")
        }
    }

    @Test("A19: the decision up front (allowMigration false) migrates at once and reports performMigration false")
    func decisionUpFront() async throws {
        try await Harness.run { h in
            let b = try await h.signUp("bea@example.com")
            let a = try await anonymous(h)
            h.services.dropEvents(true)
            let r = try await h.request(.post, "/v1/sessions", json: signInBody("bea@example.com", allowMigration: "false"), token: a.access)
            #expect(r.status == .ok, "\(r.text)")
            let migration = try #require(try r.object()["migration"] as? [String: Any])
            #expect(migration["performMigration"] as? Bool == false)
            #expect(migration["oldUserId"] as? String == a.id)
            #expect(migration["newUserId"] as? String == b.user["id"] as? String)
            try await h.request(.get, "/v1/me", token: a.access).expectProblem(.unauthorized, "session_revoked")
        }
    }

    @Test("sign-in: a bearer that does not verify is 401; a user who is not anonymous is an ordinary sign-in; allowMigration must be a boolean; null means none")
    func signInBearerAndBody() async throws {
        try await Harness.run { h in
            let b = try await h.signUp("bea@example.com")
            _ = try await h.signUp("cal@example.com")
            try await h.request(.post, "/v1/sessions", json: signInBody("bea@example.com"), token: "not-a-token")
                .expectProblem(.unauthorized, "invalid_token")
            let bAccess = try #require(b.session["accessToken"] as? String)
            let ordinary = try await h.request(.post, "/v1/sessions", json: signInBody("cal@example.com", allowMigration: "true"), token: bAccess)
            #expect(ordinary.status == .ok)
            #expect(try ordinary.object()["migration"] == nil)
            #expect(h.services.lastRequest(IdentityAPI.signIn)?.caller == nil)
            #expect(try await h.request(.get, "/v1/me", token: bAccess).status == .ok)
            let a = try await anonymous(h)
            try await h.request(.post, "/v1/sessions", json: signInBody("bea@example.com", allowMigration: #""true""#), token: a.access)
                .expectProblem(.badRequest, "malformed_request")
            try await h.request(.post, "/v1/sessions", json: signInBody("bea@example.com", allowMigration: "null"), token: a.access)
                .expectProblem(.conflict, "migration_required")
            let sent = try #require(h.services.lastRequest(IdentityAPI.signIn))
            let sid = try await claims(a.access).sid
            #expect(sent.caller?.userID == a.id && sent.caller?.sessionID == sid && sent.allowMigration == nil)
        }
    }

    @Test("resume errors: no bearer 401, missing allowMigration 400, empty or unknown handle 400 invalid_resume_handle, another user's handle refused")
    func resumeErrors() async throws {
        try await Harness.run { h in
            _ = try await h.signUp("bea@example.com")
            let a = try await anonymous(h)
            let other = try await anonymous(h)
            let problem = try await h.request(.post, "/v1/sessions", json: signInBody("bea@example.com"), token: a.access)
                .expectProblem(.conflict, "migration_required")
            let handle = try #require(problem["resumeHandle"] as? String)
            let body = #"{"resumeHandle":"\#(handle)","allowMigration":true}"#
            try await h.request(.post, "/v1/sessions/resume", json: body).expectProblem(.unauthorized, "unauthenticated")
            try await h.request(.post, "/v1/sessions/resume", json: #"{"resumeHandle":"\#(handle)"}"#, token: a.access)
                .expectProblem(.badRequest, "malformed_request")
            try await h.request(.post, "/v1/sessions/resume", json: #"{"resumeHandle":"","allowMigration":true}"#, token: a.access)
                .expectProblem(.badRequest, "invalid_resume_handle")
            try await h.request(.post, "/v1/sessions/resume", json: #"{"resumeHandle":"nope","allowMigration":true}"#, token: a.access)
                .expectProblem(.badRequest, "invalid_resume_handle")
            try await h.request(.post, "/v1/sessions/resume", json: body, token: other.access).expectProblem(.badRequest, "invalid_resume_handle")
            // Refused attempts by others leave the handle to its owner.
            #expect(try await h.request(.post, "/v1/sessions/resume", json: body, token: a.access).status == .ok)
        }
    }
}
