import AsyncHTTPClient
import Foundation
import GatehouseTestSupport
import Logging
import ProviderTestSupport
import ProviderTokens
import Testing

/// The key cache against the fake provider: Cache-Control, rotation, one fetch in flight, and
/// a provider that is down, unreachable or hanging. Time moves by the injected clock only.
@Suite("Provider ID tokens: the JWKS cache", .timeLimit(.minutes(1)))
struct JWKSCacheTests {
    @Test func cacheControlMaxAgeIsHonoured() async throws {
        try await Harness.run(configure: { $0.set(cacheControl: "public, max-age=120, must-revalidate") }) { h in
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 1)
            h.clock.advance(by: 119)
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 1, "no refetch before max-age")
            h.clock.advance(by: 2)
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 2, "a refetch once the clock passed max-age")
        }
    }

    @Test func maxAgeIsClampedToTheFloor() async throws {
        try await Harness.run(configure: { $0.set(cacheControl: "no-cache") }) { h in
            _ = try await h.verify(h.token("google"), "google")
            h.clock.advance(by: 59)
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 1, "kept for the 60 s floor even with no-cache")
            h.clock.advance(by: 1)
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 2)
        }
    }

    @Test func maxAgeIsClampedToTheCeiling() async throws {
        try await Harness.run(configure: { $0.set(cacheControl: "max-age=31536000") }) { h in
            _ = try await h.verify(h.token("google"), "google")
            h.clock.advance(by: 86_399)
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 1)
            h.clock.advance(by: 1)
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 2, "kept a day at most")
        }
    }

    @Test func withoutCacheControlTheDefaultApplies() async throws {
        try await Harness.run(configure: { $0.set(cacheControl: nil) }) { h in
            _ = try await h.verify(h.token("google"), "google")
            h.clock.advance(by: 3_599)
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 1)
            h.clock.advance(by: 1)
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 2)
        }
    }

    @Test func keyRotationIsPickedUpAfterTheUnknownKidRefetch() async throws {
        try await Harness.run { h in
            _ = try await h.verify(h.token("google", key: .rsa1), "google")
            h.fake.publish([.rsa2, .ec1])  // rsa-2 appears, rsa-1 is withdrawn
            let verified = try await h.verify(h.token("google", key: .rsa2), "google")
            #expect(verified.sub == "001234.abcdef")
            #expect(h.fake.jwksFetches == 2)
            let cache = try #require(h.verifier.cache(for: "google"))
            #expect(await cache.cachedKeyIDs == ["ec-1", "rsa-2"])
            // The withdrawn key no longer verifies anything (and costs no fetch within the interval).
            #expect(await h.reason(h.token("google", key: .rsa1), "google") == .unknownKeyID)
            #expect(h.fake.jwksFetches == 2)
        }
    }

    @Test func concurrentCallersShareOneFetch() async throws {
        try await Harness.run { h in
            let tokens = (0..<24).map { h.token("google", key: $0 % 2 == 0 ? .rsa1 : .ec1) }
            let subjects = try await withThrowingTaskGroup(of: String.self) { group in
                for token in tokens { group.addTask { try await h.verify(token, "google").sub } }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(subjects.count == 24)
            #expect(h.fake.jwksFetches == 1)
        }
    }

    @Test func providerDown() async throws {
        try await Harness.run(configure: { $0.set(mode: .down) }) { h in
            let error = await h.refusal(h.token("google"), "google")
            #expect(error?.code == "provider_unavailable")
            #expect(error?.message.contains("503") == true)
            // Not cached as a failure: once the provider is back, the next call fetches.
            h.fake.set(mode: .up)
            _ = try await h.verify(h.token("google"), "google")
            #expect(h.fake.jwksFetches == 2)
        }
    }

    @Test func providerUnreachable() async throws {
        // A loopback port that refuses connections.
        let refusing = try RefusingPort()
        let verifier = try IDTokenVerifier(
            providers: Harness.providers(base: refusing.baseURL), httpClient: .shared, options: .init(cachePolicy: Harness.policy),
            logger: Logger(label: "provider-tokens-test", factory: { _ in SwiftLogNoOpLogHandler() }))
        for provider in ["google", "corp"] {
            do throws(ProviderTokenError) {
                _ = try await verifier.verify(idToken: TestTokens.sign(["iss": "x"], with: .rsa1), provider: provider, nonce: nil)
                Issue.record("accepted with no provider")
            } catch {
                #expect(error.code == "provider_unavailable", "\(provider)")
                // AsyncHTTPClient retries a refused connection until the deadline: either way, an answer by then.
                #expect(
                    error.message.contains("could not be reached") || error.message.contains("no answer within 300 ms"),
                    "\(error.message)")
            }
        }
        withExtendedLifetime(refusing) {}
    }

    @Test func providerHangsAndTheDeadlineAnswers() async throws {
        try await Harness.run(configure: { $0.set(mode: .hang) }) { h in
            let error = await h.refusal(h.token("google"), "google")
            #expect(error?.code == "provider_unavailable")
            #expect(error?.message.contains("no answer within 300 ms") == true, "\(String(describing: error))")
        }
    }

    @Test func providerStopsInTheMiddleOfTheBody() async throws {
        try await Harness.run(configure: { $0.set(mode: .hangInBody) }) { h in
            let error = await h.refusal(h.token("google"), "google")
            #expect(error?.code == "provider_unavailable")
            #expect(error?.message.contains("no answer within 300 ms") == true, "\(String(describing: error))")
        }
    }

    @Test func callersArrivingDuringAHangingFetchShareItsDeadline() async throws {
        try await Harness.run(configure: { $0.set(mode: .hang) }) { h in
            let tokens = (0..<8).map { _ in h.token("google") }
            let codes = await withTaskGroup(of: String?.self) { group in
                for token in tokens { group.addTask { await h.refusal(token, "google")?.code } }
                return await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(codes.count == 8 && codes.allSatisfy { $0 == "provider_unavailable" })
            // They join the fetch under way (one, unless a caller was scheduled after its deadline).
            #expect(h.fake.jwksFetches <= 2)
        }
    }

    @Test func anEmptyKeySetKnowsNoKid() async throws {
        try await Harness.run { h in
            h.fake.publish([])
            // An empty set is a valid document: the kid is unknown.
            #expect(await h.reason(h.token("google"), "google") == .unknownKeyID)
        }
    }
}
