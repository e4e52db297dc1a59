import Foundation
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IdentityService
import JWTKit
import Testing

@testable import Gateway

/// `PATCH /v1/me` settings as a JSON merge patch, and custom claims in refreshed tokens
/// (issue 18, part H4), over the real services in process.
@Suite("Profile settings and custom claims")
struct ProfileSettingsTests {
    @Test("settings is an RFC 7396 merge patch: null removes, objects merge, other members stay; the patch is sent as written")
    func mergePatch() async throws {
        try await Harness.run { h in
            let (_, session) = try await h.signUp("mia@example.com")
            let token = try #require(session["accessToken"] as? String)
            let first = try await h.request(
                .patch, "/v1/me", json: #"{"settings":{"theme":"dark","auto_backup":false,"n":1.50,"notify":{"push":true,"email":true}}}"#,
                token: token)
            #expect(first.status == .ok, "\(first.text)")
            let r = try await h.request(
                .patch, "/v1/me", json: #"{"displayName":"Mia","settings":{"theme":null,"notify":{"email":false},"lang":"ja"}}"#, token: token)
            #expect(r.status == .ok, "\(r.text)")
            // Byte for byte: the untouched number keeps its text, booleans stay booleans.
            #expect(r.text.contains(#""settings":{"auto_backup":false,"n":1.50,"notify":{"push":true,"email":false},"lang":"ja"}"#), "\(r.text)")
            #expect(h.services.lastRequest(IdentityAPI.updateProfile)?.settingsPatchJSON == #"{"theme":null,"notify":{"email":false},"lang":"ja"}"#)
            #expect(h.services.lastRequest(IdentityAPI.updateProfile)?.settingsJSON == nil)
            let me = try await h.request(.get, "/v1/me", token: token)
            #expect(try me.object()["displayName"] as? String == "Mia")
            #expect(me.text.contains(#""settings":{"auto_backup":false,"n":1.50,"notify":{"push":true,"email":false},"lang":"ja"}"#))
            // No settings member: settings untouched.
            let named = try await h.request(.patch, "/v1/me", json: #"{"displayName":"Mia K."}"#, token: token)
            #expect(named.text.contains(#""lang":"ja""#))
        }
    }

    @Test("a result over 16 KiB: 422 invalid_argument naming settings and the limit, nothing written")
    func oversize() async throws {
        try await Harness.run { h in
            let (_, session) = try await h.signUp("noa@example.com")
            let token = try #require(session["accessToken"] as? String)
            let half = String(repeating: "x", count: 9_000)
            #expect(try await h.request(.patch, "/v1/me", json: #"{"settings":{"a":"\#(half)"}}"#, token: token).status == .ok)
            let before = try await h.request(.get, "/v1/me", token: token).text
            let refused = try await h.request(.patch, "/v1/me", json: #"{"displayName":"Noa","settings":{"b":"\#(half)"}}"#, token: token)
            let problem = try refused.expectProblem(.unprocessableContent, "invalid_argument")
            let detail = try #require(problem["detail"] as? String)
            #expect(detail.contains("settings") && detail.contains("16 KiB"), "\(detail)")
            #expect(try await h.request(.get, "/v1/me", token: token).text == before)
        }
    }

    @Test("custom claims set by an operator are in the access token from the next refresh, not before")
    func customClaimsAtRefresh() async throws {
        try await Harness.run { h in
            let (user, session) = try await h.signUp("oli@example.com")
            let id = try #require(user["id"] as? String)
            _ = try await h.services.identityHandlers.admin.setCustomClaims(SetCustomClaimsRequest(userID: id, claimsJSON: #"{"role":"admin","tier":2}"#))
            let old = try #require(session["accessToken"] as? String)
            #expect(try await JWTKeyCollection().unverified(old, as: ClaimsPeek.self).role == nil)
            let refresh = try #require(session["refreshToken"] as? String)
            let refreshed = try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh)"}"#)
            #expect(refreshed.status == .ok)
            let next = try #require((try refreshed.object()["session"] as? [String: Any])?["accessToken"] as? String)
            let claims = try await JWTKeyCollection().unverified(next, as: ClaimsPeek.self)
            #expect(claims.role == "admin" && claims.tier == 2)
            // The token with custom claims is accepted as any other.
            #expect(try await h.request(.get, "/v1/me", token: next).status == .ok)
        }
    }
}

/// The custom claims `customClaimsAtRefresh` sets.
struct ClaimsPeek: JWTPayload {
    var role: String?
    var tier: Int?
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
