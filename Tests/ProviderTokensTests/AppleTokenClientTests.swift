import Crypto
import Foundation
import GatehouseSupport
import GatehouseTestSupport
import ProviderTestSupport
import ProviderTokens
import Testing

/// Exchanging codes and revoking tokens against the fake's Apple endpoints.
@Suite("Sign in with Apple: the token and revoke endpoints", .timeLimit(.minutes(1)))
struct AppleTokenClientTests {
    @Test func aCodeIsExchangedForTokensWhoseIDTokenVerifies() async throws {
        try await AppleHarness.run { h in
            let code = "c.0a1b2c.+/=&é"  // every byte of it must travel form-encoded
            let refresh = h.fake.apple.register(
                code: code, clientID: AppleHarness.services, subject: "000999.user", redirectURI: "https://app.example.com/apple",
                claims: ["email": "x@privaterelay.appleid.com", "email_verified": "true", "is_private_email": true])
            let response = try await h.client.exchange(code: code, clientID: AppleHarness.services, redirectURI: "https://app.example.com/apple")
            #expect(response.refreshToken == refresh)
            #expect(response.tokenType == "bearer")
            #expect(response.expiresIn == 3600)
            #expect(!response.accessToken.isEmpty)
            #expect(h.fake.apple.refusedSecrets.isEmpty)
            let verified = try await h.idTokens.verify(idToken: response.idToken, provider: "apple", nonce: nil)
            #expect(verified.sub == "000999.user")
            #expect(verified.aud == [AppleHarness.services])
            #expect(verified.emailVerified && verified.isPrivateEmail)
            // The description shows no token.
            for text in ["\(response)", String(reflecting: response)] {
                for token in [response.accessToken, refresh, response.idToken] { #expect(!text.contains(token)) }
            }
        }
    }

    @Test func aCodeIsUsedOnce() async throws {
        try await AppleHarness.run { h in
            h.fake.apple.register(code: "code-once", clientID: AppleHarness.services)
            _ = try await h.client.exchange(code: "code-once", clientID: AppleHarness.services)
            #expect(await h.exchangeError("code-once") == .invalidGrant)
        }
    }

    @Test func unknownCodesAndMismatchesAreInvalidGrant() async throws {
        try await AppleHarness.run { h in
            let error = await h.exchangeError("never-registered")
            #expect(error == .invalidGrant)
            #expect(error?.code == "invalid_grant")
            // A code of the iOS app exchanged as the services id.
            h.fake.apple.register(code: "code-ios", clientID: ClientIDs.apple[0])
            #expect(await h.exchangeError("code-ios") == .invalidGrant)
            // Another redirect URI than the authorization request's.
            h.fake.apple.register(code: "code-web", clientID: AppleHarness.services, redirectURI: "https://app.example.com/apple")
            #expect(await h.exchangeError("code-web", redirectURI: "https://evil.example.com/apple") == .invalidGrant)
            // The refusals did not use the codes up.
            _ = try await h.client.exchange(code: "code-ios", clientID: ClientIDs.apple[0])
            _ = try await h.client.exchange(code: "code-web", clientID: AppleHarness.services, redirectURI: "https://app.example.com/apple")
        }
    }

    @Test func aSecretSignedWithAnotherKeyIsInvalidClient() async throws {
        try await AppleHarness.run { h in
            h.fake.apple.register(code: "code-1", clientID: AppleHarness.services)
            // Same team and key id, another private key: the signature does not verify.
            let forged = try AppleClientSecret(
                teamID: AppleHarness.teamID, keyID: AppleHarness.keyID, clientIDs: ClientIDs.apple,
                privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation, clock: h.clock.wallClock)
            let client = try AppleTokenClient(
                clientSecret: forged, tokenURL: URL(string: h.base + "/auth/token")!, revokeURL: URL(string: h.base + "/auth/revoke")!,
                timeout: .milliseconds(300), allowInsecureLoopback: true, logger: AppleHarness.quiet())
            do throws(AppleServerError) {
                _ = try await client.exchange(code: "code-1", clientID: AppleHarness.services)
                Issue.record("a forged secret was accepted")
            } catch {
                #expect(error == .rejected(error: "invalid_client", status: 400))
                #expect(error.code == "provider_rejected")
            }
            #expect(h.fake.apple.refusedSecrets == ["bad signature"])
            // The code was not used up.
            _ = try await h.client.exchange(code: "code-1", clientID: AppleHarness.services)
        }
    }

    @Test func aSecretIssuedInTheFakesFutureIsInvalidClient() async throws {
        // The fake reads the real time, long before the test clock's 2027: the secret's iat is in its future.
        try await AppleHarness.run(configure: { $0.apple.set(clock: .system) }) { h in
            h.fake.apple.register(code: "code-1", clientID: AppleHarness.services)
            #expect(await h.exchangeError("code-1") == .rejected(error: "invalid_client", status: 400))
            #expect(h.fake.apple.refusedSecrets == ["iat is in the future"])
        }
    }

    @Test func aClientIDWithoutASecretMakesNoRequest() async throws {
        try await AppleHarness.run { h in
            h.fake.apple.register(code: "code-2", clientID: "com.example.unregistered")
            let error = await h.exchangeError("code-2", clientID: "com.example.unregistered")
            #expect(error == .unknownClient("com.example.unregistered"))
            #expect(error?.code == "unknown_client")
            #expect(h.fake.apple.tokenRequests == 0)
        }
    }

    @Test func anExpiredSecretIsRefusedByTheFake() async throws {
        let fakeClock = ManualClock()
        try await AppleHarness.run(configure: { $0.apple.set(clock: fakeClock.wallClock) }) { h in
            fakeClock.set(h.clock.now.addingTimeInterval(86_401))  // Apple's clock is past the secret's exp
            h.fake.apple.register(code: "code-1", clientID: AppleHarness.services)
            #expect(await h.exchangeError("code-1") == .rejected(error: "invalid_client", status: 400))
            #expect(h.fake.apple.refusedSecrets == ["expired"])
            // Our clock reaches the renewal margin: a new secret is made and accepted.
            h.clock.advance(by: 86_400 - 3_600)
            fakeClock.set(h.clock.now)
            _ = try await h.client.exchange(code: "code-1", clientID: AppleHarness.services)
        }
    }

    @Test func anAppleThatIsDownIsUnavailable() async throws {
        try await AppleHarness.run(configure: { $0.apple.set(tokenMode: .down) }) { h in
            h.fake.apple.register(code: "code-1", clientID: AppleHarness.services)
            let error = await h.exchangeError("code-1")
            #expect(error?.code == "provider_unavailable")
            #expect(error?.message.contains("503") == true, "\(String(describing: error))")
        }
    }

    @Test func aHangingAppleIsAnsweredByTheDeadline() async throws {
        try await AppleHarness.run(configure: { $0.apple.set(tokenMode: .hang) }) { h in
            h.fake.apple.register(code: "code-1", clientID: AppleHarness.services)
            let start = ContinuousClock.now
            let error = await h.exchangeError("code-1")
            #expect(ContinuousClock.now - start < .seconds(2))
            #expect(error?.code == "provider_unavailable")
            #expect(error?.message.contains("within 300 ms") == true, "\(String(describing: error))")
        }
    }

    @Test func anUnreachableAppleIsUnavailable() async throws {
        let refusing = try RefusingPort()
        let secrets = try AppleClientSecret(
            teamID: AppleHarness.teamID, keyID: AppleHarness.keyID, clientIDs: ClientIDs.apple, privateKeyPEM: AppleHarness.teamKeyPEM)
        let client = try AppleTokenClient(
            clientSecret: secrets, tokenURL: URL(string: refusing.baseURL + "/auth/token")!,
            revokeURL: URL(string: refusing.baseURL + "/auth/revoke")!, timeout: .milliseconds(300), allowInsecureLoopback: true,
            logger: AppleHarness.quiet())
        await #expect(throws: AppleServerError.self) { try await client.revoke(token: "r.1", clientID: AppleHarness.services) }
        do throws(AppleServerError) {
            _ = try await client.exchange(code: "c.1", clientID: AppleHarness.services)
        } catch {
            #expect(error.code == "provider_unavailable")
        }
    }

    @Test func aRevocationIsRecorded() async throws {
        try await AppleHarness.run { h in
            let refresh = h.fake.apple.register(code: "code-1", clientID: AppleHarness.services)
            let response = try await h.client.exchange(code: "code-1", clientID: AppleHarness.services)
            try await h.client.revoke(token: try #require(response.refreshToken), clientID: AppleHarness.services)
            #expect(
                h.fake.apple.revocations == [.init(token: refresh, tokenTypeHint: "refresh_token", clientID: AppleHarness.services)])
            try await h.client.revoke(token: response.accessToken, tokenTypeHint: .accessToken, clientID: AppleHarness.services)
            #expect(h.fake.apple.revocations.last?.tokenTypeHint == "access_token")
        }
    }

    @Test func aFailedRevocationIsSurfaced() async throws {
        try await AppleHarness.run(configure: { $0.apple.set(revokeMode: .down) }) { h in
            #expect(await h.revokeError("r.token-1")?.code == "provider_unavailable")
            h.fake.apple.set(revokeMode: .hang)
            let start = ContinuousClock.now
            #expect(await h.revokeError("r.token-1")?.code == "provider_unavailable")
            #expect(ContinuousClock.now - start < .seconds(2))
            #expect(h.fake.apple.revocations.isEmpty)
            // Refused: the secret of a client id the account does not have.
            h.fake.apple.set(revokeMode: .up)
            #expect(await h.revokeError("r.token-1", clientID: "com.example.other") == .unknownClient("com.example.other"))
        }
    }

    @Test func plainHTTPIsRefusedOffLoopbackAndOutsideTestMode() throws {
        let secrets = try AppleClientSecret(
            teamID: AppleHarness.teamID, keyID: AppleHarness.keyID, clientIDs: ClientIDs.apple, privateKeyPEM: AppleHarness.teamKeyPEM)
        #expect(throws: ProviderConfigurationError.self) {
            try AppleTokenClient(clientSecret: secrets, tokenURL: URL(string: "http://127.0.0.1:9/auth/token")!)
        }
        #expect(throws: ProviderConfigurationError.self) {
            try AppleTokenClient(
                clientSecret: secrets, revokeURL: URL(string: "http://apple.example.com/auth/revoke")!, allowInsecureLoopback: true)
        }
        let client = try AppleTokenClient(clientSecret: secrets)
        #expect(client.tokenURL.absoluteString == "https://appleid.apple.com/auth/token")
        #expect(client.revokeURL.absoluteString == "https://appleid.apple.com/auth/revoke")
    }
}
