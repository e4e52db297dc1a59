import Foundation
import GatehouseTestSupport
import ProviderTestSupport
import ProviderTokens
import Testing

/// Each attack on the verifier, one test each: the token is refused, for the expected reason.
@Suite("Provider ID tokens: attacks are refused", .timeLimit(.minutes(1)))
struct AttackTests {
    @Test func wrongAudience() async throws {
        try await Harness.run { h in
            let token = h.token("google", extra: ["aud": ["someone-else.apps.googleusercontent.com"]])
            #expect(await h.reason(token, "google") == .wrongAudience)
            // A client id of another provider is not this provider's audience either.
            #expect(await h.reason(h.token("google", extra: ["aud": ClientIDs.apple[0]]), "google") == .wrongAudience)
        }
    }

    @Test func wrongIssuer() async throws {
        try await Harness.run { h in
            let token = h.token("google", extra: ["iss": "https://accounts.google.com.evil.example"])
            #expect(await h.reason(token, "google") == .wrongIssuer)
            // Apple's token presented as Google's: signed by a key both trust here, but not Google's issuer.
            #expect(await h.reason(h.token("apple", extra: ["aud": ClientIDs.google[0]]), "google") == .wrongIssuer)
        }
    }

    @Test func expired() async throws {
        try await Harness.run { h in
            let now = Int(h.clock.now.timeIntervalSince1970)
            let token = h.token("google", extra: ["iat": now - 3_700, "exp": now - 61])
            let error = await h.refusal(token, "google")
            #expect(error == .invalidToken(.expired))
            #expect(error?.code == "invalid_provider_token")
            // Within the 60 s skew it is still accepted.
            _ = try await h.verify(h.token("google", extra: ["iat": now - 3_600, "exp": now - 30]), "google")
            // A token accepted now is refused once the clock passes its exp.
            let later = h.token("google")
            _ = try await h.verify(later, "google")
            h.clock.advance(by: 600 + 61)
            #expect(await h.reason(h.token("google", extra: ["exp": now + 600]), "google") == .expired)
        }
    }

    @Test func issuedInTheFuture() async throws {
        try await Harness.run { h in
            let now = Int(h.clock.now.timeIntervalSince1970)
            #expect(await h.reason(h.token("google", extra: ["iat": now + 120, "exp": now + 720]), "google") == .issuedInFuture)
            _ = try await h.verify(h.token("google", extra: ["iat": now + 30]), "google")
        }
    }

    @Test func algNone() async throws {
        try await Harness.run { h in
            let token = TestTokens.unsigned(h.claims("google"), kid: TestSigningKey.rsa1.kid)
            #expect(await h.reason(token, "google") == .algorithmNotAllowed)
            // Not even with a signature part attached.
            #expect(await h.reason(token + "AAAA", "google") == .algorithmNotAllowed)
            #expect(h.fake.jwksFetches == 0, "a refused algorithm never reaches the keys")
        }
    }

    @Test func hs256SignedWithThePublicKey() async throws {
        try await Harness.run { h in
            _ = try await h.verify(h.token("google"), "google")  // the keys are cached
            let rsa = TestSigningKey.rsa1
            let secrets = [
                Data(rsa.publicKeyPEM.utf8),
                try JSONSerialization.data(withJSONObject: rsa.jwk, options: [.sortedKeys]),
                Data(rsa.jwk["n"]!.utf8),
            ]
            for secret in secrets {
                let token = TestTokens.hmac(h.claims("google"), kid: rsa.kid, secret: secret)
                #expect(await h.reason(token, "google") == .algorithmNotAllowed)
            }
            for alg in ["HS384", "HS512", "hs256", "RS512", "PS256", "ES384", "EdDSA"] {
                let token = TestTokens.sign(h.claims("google"), with: rsa, header: ["alg": alg])
                #expect(await h.reason(token, "google") == .algorithmNotAllowed, "\(alg)")
            }
        }
    }

    @Test func forgedSignature() async throws {
        try await Harness.run { h in
            // A key of the attacker's with a published kid.
            #expect(await h.reason(h.token("google", key: .rogue), "google") == .badSignature)
            // A good token whose payload was changed after signing.
            let good = h.token("google").split(separator: ".").map(String.init)
            let other = TestTokens.segment(h.claims("google", extra: ["sub": "someone-else"]))
            #expect(await h.reason([good[0], other, good[2]].joined(separator: "."), "google") == .badSignature)
            // A key embedded in the header (jwk, jku, x5u) is never used: only the provider's JWKS counts.
            let rogue = TestSigningKey.rogue
            let embedded = TestTokens.sign(
                h.claims("google"), with: rogue,
                header: ["jwk": rogue.jwk, "jku": h.base + "/evil-jwks", "x5u": h.base + "/evil-cert"])
            #expect(await h.reason(embedded, "google") == .badSignature)
        }
    }

    @Test func algorithmThatDoesNotFitTheKey() async throws {
        try await Harness.run { h in
            // ES256 named with the kid of an RSA key: the key decides how it is used, not the token.
            let token = TestTokens.sign(h.claims("google"), with: .ec1, header: ["kid": TestSigningKey.rsa1.kid])
            #expect(await h.reason(token, "google") == .keyAlgorithmMismatch)
        }
    }

    @Test func missingKid() async throws {
        try await Harness.run { h in
            let token = TestTokens.sign(h.claims("google"), with: .rsa1, header: ["kid": nil])
            #expect(await h.reason(token, "google") == .missingKeyID)
        }
    }

    @Test func unknownKidRefetchesOnceThenIsRefused() async throws {
        try await Harness.run { h in
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 1)
            let stranger = TestSigningKey(kid: "unknown-1", material: TestSigningKey.rogue.material)
            #expect(await h.reason(h.token("google", key: stranger), "google") == .unknownKeyID)
            #expect(h.fake.jwksFetches == 2, "an unknown kid refetches once")
            // Another unknown kid within the interval: refused without asking the provider.
            let another = TestSigningKey(kid: "unknown-2", material: TestSigningKey.rogue.material)
            #expect(await h.reason(h.token("google", key: another), "google") == .unknownKeyID)
            #expect(await h.reason(h.token("google", key: stranger), "google") == .unknownKeyID)
            #expect(h.fake.jwksFetches == 2, "no second refetch within the interval")
            // Once the interval has passed, one more.
            h.clock.advance(by: 61)
            #expect(await h.reason(h.token("google", key: another), "google") == .unknownKeyID)
            #expect(h.fake.jwksFetches == 3)
        }
    }

    @Test func aFloodOfRandomKidsCostsOneRefetch() async throws {
        try await Harness.run { h in
            _ = try await h.verify(h.token("google"), "google")
            let tokens = (0..<40).map { index in
                h.token("google", key: TestSigningKey(kid: "random-\(index)", material: TestSigningKey.rogue.material))
            }
            let reasons = await withTaskGroup(of: InvalidProviderTokenReason?.self) { group in
                for token in tokens { group.addTask { await h.reason(token, "google") } }
                return await group.reduce(into: [InvalidProviderTokenReason?]()) { $0.append($1) }
            }
            #expect(reasons.allSatisfy { $0 == .unknownKeyID })
            #expect(h.fake.jwksFetches == 2)
        }
    }

    @Test func appleNonceMismatch() async throws {
        try await Harness.run { h in
            let token = h.token("apple", extra: ["nonce": sha256Hex("raw-nonce-one")])
            #expect(await h.reason(token, "apple", nonce: "raw-nonce-two") == .nonceMismatch)
            // The hash itself is not the raw nonce.
            #expect(await h.reason(token, "apple", nonce: sha256Hex("raw-nonce-one")) == .nonceMismatch)
            // The raw nonce in an Apple token is not the hashed form Apple uses.
            let raw = h.token("apple", extra: ["nonce": "raw-nonce-one"])
            #expect(await h.reason(raw, "apple", nonce: "raw-nonce-one") == .nonceMismatch)
            // The refusals did not use the token up.
            _ = try await h.verify(token, "apple", nonce: "raw-nonce-one")
        }
    }

    @Test func googleNonceMismatch() async throws {
        try await Harness.run { h in
            let token = h.token("google", extra: ["nonce": "raw-nonce-one"])
            #expect(await h.reason(token, "google", nonce: "raw-nonce-two") == .nonceMismatch)
            #expect(await h.reason(token, "google", nonce: "raw-nonce-on") == .nonceMismatch)
            // Google compares the raw nonce: its hash does not match.
            #expect(await h.reason(token, "google", nonce: sha256Hex("raw-nonce-one")) == .nonceMismatch)
        }
    }

    @Test func nonceExpectedButMissing() async throws {
        try await Harness.run { h in
            #expect(await h.reason(h.token("apple"), "apple", nonce: "raw-nonce-one") == .nonceMissing)
            #expect(await h.reason(h.token("google"), "google", nonce: "raw-nonce-one") == .nonceMissing)
        }
    }

    @Test func nonceInTokenButNoneSent() async throws {
        try await Harness.run { h in
            #expect(await h.reason(h.token("apple", extra: ["nonce": sha256Hex("n")]), "apple") == .unexpectedNonce)
            #expect(await h.reason(h.token("google", extra: ["nonce": "n"]), "google") == .unexpectedNonce)
        }
    }

    @Test func replayedToken() async throws {
        try await Harness.run { h in
            let token = h.token("google")
            _ = try await h.verify(token, "google")
            #expect(await h.reason(token, "google") == .replayed)
            h.clock.advance(by: 300)
            #expect(await h.reason(token, "google") == .replayed)
            // Another token with the same jti is the same token id.
            let jti = UUID().uuidString
            _ = try await h.verify(h.token("google", extra: ["jti": jti]), "google")
            #expect(await h.reason(h.token("google", extra: ["jti": jti, "sub": "other"]), "google") == .replayed)
        }
    }

    @Test func replayedTokenWithoutJti() async throws {
        try await Harness.run { h in
            var claims = h.claims("apple")
            claims["jti"] = nil
            let token = TestTokens.sign(claims, with: .ec1)
            let verified = try await h.verify(token, "apple")
            #expect(verified.jti == nil)
            #expect(await h.reason(token, "apple") == .replayed)
        }
    }

    @Test func malformedTokens() async throws {
        try await Harness.run { h in
            let good = h.token("google").split(separator: ".").map(String.init)
            let cases = [
                "", "abc", "a.b", good[0] + "." + good[1], good.joined(separator: ".") + ".x",
                good[0] + "=." + good[1] + "." + good[2], "e30." + good[1] + "." + good[2],
                TestTokens.segment(["alg": "RS256", "kid": "rsa-1", "crit": ["exp"]]) + "." + good[1] + "." + good[2],
                String(repeating: "A", count: 20_000),
            ]
            for token in cases {
                let reason = await h.reason(token, "google")
                #expect(reason == .malformed || reason == .algorithmNotAllowed, "\(token.prefix(40)): \(String(describing: reason))")
            }
            #expect(h.fake.jwksFetches == 0)
        }
    }

    @Test func missingClaims() async throws {
        try await Harness.run { h in
            for name in ["sub", "exp", "iat", "aud", "iss"] {
                var claims = h.claims("google")
                claims[name] = nil
                #expect(await h.reason(TestTokens.sign(claims, with: .rsa1), "google") == .missingClaim, "\(name)")
            }
            // Of the wrong type.
            #expect(await h.reason(h.token("google", extra: ["exp": "\(Int(h.clock.now.timeIntervalSince1970) + 600)"]), "google") == .missingClaim)
            #expect(await h.reason(h.token("google", extra: ["sub": 12345]), "google") == .missingClaim)
        }
    }

    @Test func unknownProvider() async throws {
        try await Harness.run { h in
            let error = await h.refusal(h.token("google"), "facebook")
            #expect(error == .unknownProvider("facebook"))
            #expect(error?.code == "unknown_provider")
        }
    }
}
