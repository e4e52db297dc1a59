import Foundation
import GatehouseTestSupport
import ProviderTestSupport
import ProviderTokens
import Testing

/// Tokens as Apple, Google and a generic OpenID Connect provider issue them are accepted, with
/// their claims read as the identity service will need them.
@Suite("Provider ID tokens: good tokens", .timeLimit(.minutes(1)))
struct GoodTokenTests {
    @Test func appleTokenWithStringBooleansAndHashedNonce() async throws {
        try await Harness.run { h in
            let token = h.token(
                "apple",
                extra: [
                    "email": "abc123@privaterelay.appleid.com", "email_verified": "true", "is_private_email": "true",
                    "nonce": sha256Hex("raw-nonce-one"), "auth_time": Int(h.clock.now.timeIntervalSince1970),
                    "nonce_supported": true, "aud": ClientIDs.apple[1],
                ])
            let verified = try await h.verify(token, "apple", nonce: "raw-nonce-one")
            #expect(verified.provider == "apple")
            #expect(verified.sub == "001234.abcdef")
            #expect(verified.email == "abc123@privaterelay.appleid.com")
            #expect(verified.emailVerified)
            #expect(verified.isPrivateEmail)
            #expect(verified.iss == "https://appleid.apple.com")
            #expect(verified.aud == [ClientIDs.apple[1]])
            #expect(verified.nonce == sha256Hex("raw-nonce-one"))
            #expect(verified.exp == h.clock.now.addingTimeInterval(600))
            #expect(verified.iat == h.clock.now)
            #expect(verified.jti != nil)
        }
    }

    @Test func appleTokenWithRealBooleansAndStringFalse() async throws {
        try await Harness.run { h in
            let a = try await h.verify(h.token("apple", extra: ["email_verified": true, "is_private_email": false]), "apple")
            #expect(a.emailVerified && !a.isPrivateEmail)
            let b = try await h.verify(h.token("apple", extra: ["email_verified": "false", "is_private_email": "FALSE"]), "apple")
            #expect(!b.emailVerified && !b.isPrivateEmail)
            // Absent or unreadable: not verified.
            let c = try await h.verify(h.token("apple", extra: ["email": "a@example.com", "email_verified": "yes"]), "apple")
            #expect(c.email == "a@example.com" && !c.emailVerified && !c.isPrivateEmail)
        }
    }

    @Test func googleToken() async throws {
        try await Harness.run { h in
            var claims = h.claims(
                "google",
                extra: [
                    "iss": "accounts.google.com", "aud": ["other-audience", ClientIDs.google[1]], "azp": ClientIDs.google[1],
                    "email": "someone@gmail.com", "email_verified": true, "nonce": "raw-nonce-one", "hd": "example.com",
                ])
            claims["jti"] = nil
            let verified = try await h.verify(TestTokens.sign(claims, with: .rsa1), "google", nonce: "raw-nonce-one")
            #expect(verified.iss == "accounts.google.com")
            #expect(verified.aud == ["other-audience", ClientIDs.google[1]])
            #expect(verified.email == "someone@gmail.com" && verified.emailVerified && !verified.isPrivateEmail)
            #expect(verified.nonce == "raw-nonce-one")
            #expect(verified.jti == nil)
            // Google's other issuer spelling is accepted too.
            _ = try await h.verify(h.token("google", extra: ["iss": "https://accounts.google.com"]), "google")
        }
    }

    @Test func es256Token() async throws {
        try await Harness.run { h in
            let verified = try await h.verify(h.token("google", key: .ec1), "google")
            #expect(verified.sub == "001234.abcdef")
        }
    }

    @Test func genericProviderThroughDiscovery() async throws {
        try await Harness.run { h in
            let verified = try await h.verify(h.token("corp", extra: ["nonce": "n-1"]), "corp", nonce: "n-1")
            #expect(verified.iss == h.base)
            #expect(verified.aud == ClientIDs.corp)
            #expect(h.fake.discoveryFetches == 1)
            #expect(h.fake.jwksFetches == 1)
            _ = try await h.verify(h.token("corp", key: .ec1), "corp")
            #expect(h.fake.discoveryFetches == 1, "the JWKS address found is kept")
            #expect(h.fake.jwksFetches == 1)
            let cache = try #require(h.verifier.cache(for: "corp"))
            #expect(await cache.cachedKeyIDs == ["ec-1", "rsa-1"])
        }
    }

    @Test func discoveryNamingAnotherIssuerIsRefused() async throws {
        try await Harness.run(configure: { fake in fake.set(discoveryIssuer: "https://evil.example") }) { h in
            let error = await h.refusal(h.token("corp"), "corp")
            #expect(error?.code == "provider_unavailable")
            #expect(error?.message.contains("another issuer") == true)
            #expect(h.fake.jwksFetches == 0)
        }
    }

    @Test func discoveryPointingAtPlainHTTPOffLoopbackIsRefused() async throws {
        try await Harness.run(configure: { fake in fake.set(discoveryJWKSURI: "http://keys.example.com/jwks") }) { h in
            let error = await h.refusal(h.token("corp"), "corp")
            #expect(error?.code == "provider_unavailable")
            #expect(error?.message.contains("jwks_uri") == true)
            #expect(h.fake.jwksFetches == 0)
        }
    }
}
