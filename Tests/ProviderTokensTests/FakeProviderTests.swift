import Foundation
import Logging
import GatehouseTestSupport
import ProviderTestSupport
import ProviderTokens
import Testing

/// The fake as an end-to-end test runs it: started, kept across awaits, stopped.
@Suite("Provider ID tokens: the fake provider", .timeLimit(.minutes(1)))
struct FakeProviderTests {
    @Test func startedAndStoppedExplicitly() async throws {
        let (fake, base) = try await FakeOpenIDProvider.start(keys: [.ec1])
        #expect(fake.baseURL == base)
        let clock = ManualClock()
        let verifier = try IDTokenVerifier(
            providers: Harness.providers(base: base), clock: clock.wallClock, options: .init(cachePolicy: Harness.policy),
            logger: QuietLogger.quiet)
        let claims = standardClaims(issuer: Harness.googleIssuer, audience: ClientIDs.google[0], now: clock.now)
        let verified = try await verifier.verify(idToken: TestSigningKey.ec1.idToken(claims: claims), provider: "google", nonce: nil)
        #expect(verified.sub == "001234.abcdef")
        await #expect(throws: (any Error).self) { try await fake.start() }  // a fake starts once
        await fake.stop()
        await fake.stop()  // stopping twice is harmless
        // Stopped: the next fetch finds nobody.
        clock.advance(by: 86_400)
        let error = await #expect(throws: ProviderTokenError.self) {
            try await verifier.verify(idToken: TestSigningKey.ec1.idToken(claims: standardClaims(
                issuer: Harness.googleIssuer, audience: ClientIDs.google[0], now: clock.now)), provider: "google", nonce: nil)
        }
        #expect(error?.code == "provider_unavailable")
    }

    @Test func tokensFromCodableClaims() async throws {
        struct Claims: Encodable {
            var iss, sub, aud: String
            var iat, exp: Int
        }
        try await Harness.run { h in
            let now = Int(h.clock.now.timeIntervalSince1970)
            let token = try TestSigningKey.rsa1.idToken(
                Claims(iss: Harness.googleIssuer, sub: "codable", aud: ClientIDs.google[1], iat: now, exp: now + 600), header: ["typ": nil])
            #expect(try await h.verify(token, "google").sub == "codable")
        }
    }
}

enum QuietLogger {
    static var quiet: Logger {
        var logger = Logger(label: "provider-tokens-test")
        logger.logLevel = .critical
        return logger
    }
}
