import Foundation
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import Testing

@testable import Gateway

/// `POST /v1/accounts/anonymous` over the real identity and token services in process.
@Suite("Anonymous accounts")
struct AnonymousTests {
    @Test("an anonymous start: 201 with a user without email, isAnonymous in /v1/me and is_anonymous in the token; refresh works")
    func anonymousStart() async throws {
        try await Harness.run { h in
            let r = try await h.request(.post, "/v1/accounts/anonymous")
            #expect(r.status == .created)
            #expect(r.headers[.cacheControl] == "no-store")
            let body = try r.object()
            let user = try #require(body["user"] as? [String: Any])
            #expect(user["isAnonymous"] as? Bool == true)
            #expect(user["email"] is NSNull)
            let session = try #require(body["session"] as? [String: Any])
            let access = try #require(session["accessToken"] as? String)
            let claims = try await JWTKeyCollection().unverified(access, as: AccessTokenClaims.self)
            #expect(claims.isAnonymous == true)
            #expect(claims.sub == user["id"] as? String)
            #expect(claims.email == nil)
            let me = try await h.request(.get, "/v1/me", token: access)
            #expect(me.status == .ok)
            #expect(try me.object()["isAnonymous"] as? Bool == true)
            #expect(try me.object()["id"] as? String == user["id"] as? String)
            let refresh = try #require(session["refreshToken"] as? String)
            let refreshed = try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh)"}"#)
            #expect(refreshed.status == .ok)
            let next = try #require((try refreshed.object()["session"] as? [String: Any])?["accessToken"] as? String)
            #expect(try await JWTKeyCollection().unverified(next, as: AccessTokenClaims.self).isAnonymous == true)
            // Each call is a new user.
            let second = try await h.request(.post, "/v1/accounts/anonymous")
            #expect((try second.object()["user"] as? [String: Any])?["id"] as? String != user["id"] as? String)
        }
    }

    @Test("anonymous sign-ups are limited per client address: 429 rate_limited with Retry-After")
    func rateLimited() async throws {
        let limits = RateLimits(limits: [.anonymousSignUp: RateLimit(perSecond: 1.0 / 60, burst: 2)], maxClients: 1000)
        try await Harness.run(.live, configure: { $0.rateLimits = limits }) { h in
            #expect(try await h.request(.post, "/v1/accounts/anonymous").status == .created)
            #expect(try await h.request(.post, "/v1/accounts/anonymous").status == .created)
            let refused = try await h.request(.post, "/v1/accounts/anonymous")
            try refused.expectProblem(.tooManyRequests, "rate_limited")
            #expect(refused.headers[.retryAfter] != nil)
        }
    }
}
