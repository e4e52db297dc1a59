import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import Testing
import GatehouseContracts
import RPCRouting

@testable import Gateway
import GatehouseSupport
import GatehouseTestSupport
import TokenService

@Suite struct AuthTests {
    static let invalidChallenge = #"Bearer realm="gatehouse", error="invalid_token""#

    func b64(_ s: String) -> String {
        Data(s.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    @Test func missingTokenGetsBareChallenge() async throws {
        try await Harness.run { h in
            let r = try await h.request(.get, "/v1/me")
            try r.expectProblem(.unauthorized, "unauthenticated")
            #expect(r.headers[.wwwAuthenticate] == #"Bearer realm="gatehouse""#)
            let basic = try await h.request(.get, "/v1/me", headers: [.authorization: "Basic YTpi"])
            try basic.expectProblem(.unauthorized, "unauthenticated")
        }
    }

    @Test func expiredTokenRefused() async throws {
        try await Harness.run { h in
            let (user, session) = try await h.signUp()
            let old = try await h.services.signer.mint(
                sub: user["id"] as! String, sid: "s1", issuedAt: h.clock.now.addingTimeInterval(-3600), ttl: 900)
            let r = try await h.request(.get, "/v1/me", token: old)
            try r.expectProblem(.unauthorized, "token_expired")
            #expect(r.headers[.wwwAuthenticate] == Self.invalidChallenge)
            // Within the leeway it still works; past it, it does not.
            let token = session["accessToken"] as! String
            h.clock.advance(by: 900 + 5)
            #expect(try await h.request(.get, "/v1/me", token: token).status == .ok)
            h.clock.advance(by: 10)
            try await h.request(.get, "/v1/me", token: token).expectProblem(.unauthorized, "token_expired")
        }
    }

    @Test func tamperedTokenRefused() async throws {
        try await Harness.run { h in
            let (_, session) = try await h.signUp()
            let parts = (session["accessToken"] as! String).split(separator: ".").map(String.init)
            let payloadData = Data(try #require(Base64URL.decodeBytes(Substring(parts[1]))))
            var payload = try #require(JSONSerialization.jsonObject(with: payloadData) as? [String: Any])
            payload["sub"] = "user-999"
            let forged = String(decoding: try JSONSerialization.data(withJSONObject: payload), as: UTF8.self)
            let tampered = [parts[0], b64(forged), parts[2]].joined(separator: ".")
            let r = try await h.request(.get, "/v1/me", token: tampered)
            try r.expectProblem(.unauthorized, "invalid_token")
            #expect(r.headers[.wwwAuthenticate] == Self.invalidChallenge)
            try await h.request(.get, "/v1/me", token: "not.a.jwt").expectProblem(.unauthorized, "invalid_token")
            try await h.request(.get, "/v1/me", token: "garbage").expectProblem(.unauthorized, "invalid_token")
        }
    }

    @Test func algNoneAndHMACRefused() async throws {
        try await Harness.run { h in
            let (_, session) = try await h.signUp()
            let parts = (session["accessToken"] as! String).split(separator: ".").map(String.init)
            let none = b64(#"{"alg":"none","kid":"key-1","typ":"JWT"}"#) + "." + parts[1] + "."
            try await h.request(.get, "/v1/me", token: none).expectProblem(.unauthorized, "invalid_token")

            // HS256 signed with the public key's text as secret (classic key-confusion attack).
            let hmac = JWTKeyCollection()
            await hmac.add(hmac: HMACKey(from: try await LocalCaller(router: h.services.token.router()).call(TokenAPI.jwks, Empty()).json), digestAlgorithm: .sha256, kid: "key-1")
            let claims = try await hmac.unverified(session["accessToken"] as! String, as: AccessTokenClaims.self)
            let hs = try await hmac.sign(claims, kid: "key-1")
            try await h.request(.get, "/v1/me", token: hs).expectProblem(.unauthorized, "invalid_token")

            // ES256 header on a token that claims another algorithm family for the kid.
            let mismatched = b64(#"{"alg":"RS256","kid":"key-1"}"#) + "." + parts[1] + "." + parts[2]
            try await h.request(.get, "/v1/me", token: mismatched).expectProblem(.unauthorized, "invalid_token")
        }
    }

    @Test func issuerAndAudienceMustMatchExactly() async throws {
        try await Harness.run { h in
            let (user, _) = try await h.signUp()
            let id = user["id"] as! String
            let wrongIssuer = try await h.services.signer.mint(sub: id, sid: "s", issuer: "https://auth.test/")
            try await h.request(.get, "/v1/me", token: wrongIssuer).expectProblem(.unauthorized, "invalid_token")
            let wrongAudience = try await h.services.signer.mint(sub: id, sid: "s", audience: "gatehouse-test-2")
            try await h.request(.get, "/v1/me", token: wrongAudience).expectProblem(.unauthorized, "invalid_token")
            let fine = try await h.services.signer.mint(sub: id, sid: "s")
            #expect(try await h.request(.get, "/v1/me", token: fine).status == .ok)
        }
    }

    @Test func unknownKidRefetchesAtBoundedRate() async throws {
        try await Harness.run { h in
            let (user, session) = try await h.signUp()
            let id = user["id"] as! String
            #expect(try await h.request(.get, "/v1/me", token: session["accessToken"] as? String).status == .ok)
            #expect(h.services.calls(to: TokenAPI.jwks) == 1)

            // The token service rotates to a new published key: one refetch, then accepted.
            await h.services.signer.addSigningKey(kid: "key-2", publish: true)
            let rotated = try await h.services.signer.mint(sub: id, sid: "s2")
            #expect(try await h.request(.get, "/v1/me", token: rotated).status == .ok)
            #expect(h.services.calls(to: TokenAPI.jwks) == 2)
            #expect(try await h.request(.get, "/v1/me", token: rotated).status == .ok)
            #expect(h.services.calls(to: TokenAPI.jwks) == 2)

            // An unpublished kid: refused, and within 5 s no further fetch however many tries.
            await h.services.signer.addSigningKey(kid: "key-3", publish: false)
            let unknown = try await h.services.signer.mint(sub: id, sid: "s3")
            for _ in 0..<5 {
                try await h.request(.get, "/v1/me", token: unknown).expectProblem(.unauthorized, "invalid_token")
            }
            #expect(h.services.calls(to: TokenAPI.jwks) == 2)
            h.clock.advance(by: 6)
            try await h.request(.get, "/v1/me", token: unknown).expectProblem(.unauthorized, "invalid_token")
            #expect(h.services.calls(to: TokenAPI.jwks) == 3)
        }
    }

    @Test("a cold gateway answers many requests that arrive at once with the same fresh token: none is refused while the first JWKS fetch is under way")
    func concurrentColdRequestsShareTheFirstFetch() async throws {
        try await Harness.run { h in
            let (_, session) = try await h.signUp()
            let token = session["accessToken"] as! String
            #expect(h.services.calls(to: TokenAPI.jwks) == 0)
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<32 { group.addTask { try await h.request(.get, "/v1/me", token: token).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 != .ok }.isEmpty, "\(statuses)")
            #expect(h.services.calls(to: TokenAPI.jwks) <= 2)
        }
    }

    @Test func revocationFeedRefusesSession() async throws {
        try await Harness.run { h in
            let (_, session) = try await h.signUp()
            let token = session["accessToken"] as! String
            #expect(try await h.request(.get, "/v1/me", token: token).status == .ok)
            let claims = try await JWTKeyCollection().unverified(token, as: AccessTokenClaims.self)
            // The gateway answered an authenticated request: it has subscribed and loaded the state.
            h.services.emitRevocation(claims.sid)
            try await waitUntil("the revocation event applied") {
                try await h.request(.get, "/v1/me", token: token).status == .unauthorized
            }
            try await h.request(.get, "/v1/me", token: token).expectProblem(.unauthorized, "session_revoked")
            // Another session of the same user is unaffected.
            let other = try await h.request(.post, "/v1/sessions", json: #"{"email":"ada@example.com","password":"correct horse battery"}"#)
            let otherToken = (try other.object()["session"] as! [String: Any])["accessToken"] as! String
            #expect(try await h.request(.get, "/v1/me", token: otherToken).status == .ok)
        }
    }

    @Test func revocationListIsBounded() {
        let list = RevocationList(ttl: .seconds(60), capacity: 3)
        let t0 = Date()
        for i in 0..<5 { list.insert("s\(i)", now: t0) }
        #expect(list.count == 3)
        #expect(!list.contains("s0", now: t0))
        #expect(list.contains("s4", now: t0))
        #expect(!list.contains("s4", now: t0.addingTimeInterval(61)))
        list.insert("late", now: t0.addingTimeInterval(61))
        #expect(list.count == 1)
    }

    @Test("the list overflows only when it drops an entry whose tokens may still be valid; a session listed twice is one entry")
    func revocationListOverflow() {
        let list = RevocationList(ttl: .seconds(60), capacity: 2)
        let t0 = Date()
        // Listed again by a reload: no second entry, so no eviction.
        for _ in 0..<10 { list.insert("a", now: t0); list.insert("b", now: t0) }
        #expect(list.count == 2 && !list.isOverflowed(now: t0))
        list.insert("c", now: t0.addingTimeInterval(1))
        #expect(!list.contains("a", now: t0.addingTimeInterval(1)))
        #expect(list.isOverflowed(now: t0.addingTimeInterval(1)))
        #expect(list.isOverflowed(now: t0.addingTimeInterval(59)))
        // Past a's last valid token the list vouches for everything again.
        #expect(!list.isOverflowed(now: t0.addingTimeInterval(61)))
    }
}

@Suite("Bearer header parsing")
struct BearerHeaderTests {
    @Test func schemeIsCaseInsensitiveAndTheTokenIsTrimmed() {
        #expect(BearerVerifier.bearerToken("Bearer abc.def.ghi") == "abc.def.ghi")
        #expect(BearerVerifier.bearerToken("bearer   abc.def.ghi \t ") == "abc.def.ghi")
        #expect(BearerVerifier.bearerToken("BEARER \tabc") == "abc")
    }

    @Test func otherSchemesAndEmptyTokensAreRefused() {
        #expect(BearerVerifier.bearerToken("Basic dXNlcjpwYXNz") == nil)
        #expect(BearerVerifier.bearerToken("Bearer") == nil)
        #expect(BearerVerifier.bearerToken("Bearer    ") == nil)
        #expect(BearerVerifier.bearerToken("Bearer \t\t") == nil)
        #expect(BearerVerifier.bearerToken("") == nil)
        #expect(BearerVerifier.bearerToken("Bearerabc") == nil)
    }
}
