import GatehouseSupport
import Crypto
import Foundation
import NIOCore
import NIOPosix
import Testing
@testable import LoadGenerator

/// A configuration for small, request-bounded runs against the fake.
func small(_ url: String, _ scenario: Scenario, requests: Int? = 40, concurrency: Int = 4, setupUsers: Int? = nil,
           duration: Double = 30) -> LoadConfiguration {
    LoadConfiguration(url: url, scenario: scenario, concurrency: concurrency, duration: duration, maxRequests: requests,
                      setupUsers: setupUsers, timeout: 5)
}

@Suite("Scenarios against the fake gateway")
struct ScenarioTests {
    @Test func signupCreatesAFreshAccountPerRequest() async throws {
        let fake = FakeGateway()
        let result = try await fake.serve { url in try await LoadRunner(small(url, .signup, requests: 30)).run() }
        #expect(result.totalRequests == 30)
        #expect(result.successfulRequests == 30)
        #expect(result.failedRequests == 0)
        #expect(result.stoppedBy == "requests")
        #expect(result.setupUsers == 0)
        #expect(result.latencyMs.count == 30)
        #expect(result.throughput > 0)
        let state = fake.snapshot
        #expect(state.signups == 30)
        #expect(state.users.count == 30)  // every email was new: no 409
        #expect(state.users.keys.allSatisfy { $0.hasPrefix("load-") && $0.hasSuffix("@example.com") })
    }

    @Test("provider: presigned ES256 tokens, each jti once, round-robin over the subjects; each verifies with the JWKS the generator prints")
    func providerSignsFreshTokensPerRequest() async throws {
        let pem = ProviderSigner.newKeyPEM()
        let signer = try #require(ProviderSigner(pem: pem))
        var config = small("", .provider, requests: 50, concurrency: 4, setupUsers: 5)
        config.providerKeyPEM = pem
        let fake = FakeGateway()
        let result = try await fake.serve { url in
            config.url = url
            return try await LoadRunner(config).run()
        }
        #expect(result.successfulRequests == 50)
        #expect(result.failedRequests == 0)
        let state = fake.snapshot
        #expect(state.providerUsers.count == 5)
        #expect(state.providerJTIs.count == 50)
        // The printed JWKS verifies every token sent.
        let jwks = try #require(JSONSerialization.jsonObject(with: Data(signer.jwks.utf8)) as? [String: Any])
        let jwk = try #require((jwks["keys"] as? [[String: String]])?.first)
        func bytes(_ text: String) throws -> Data { try #require(Base64URL.decode(text)) }
        let key = try P256.Signing.PublicKey(rawRepresentation: try bytes(jwk["x"]!) + bytes(jwk["y"]!))
        for token in state.providerTokens {
            let parts = token.split(separator: ".").map(String.init)
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: try bytes(parts[2]))
            #expect(key.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
        }
    }

    @Test func signinUsesTheSetupPoolAndSetupIsNotCounted() async throws {
        let fake = FakeGateway()
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .signin, requests: 40, concurrency: 4, setupUsers: 5)).run()
        }
        #expect(result.totalRequests == 40)
        #expect(result.successfulRequests == 40)
        #expect(result.setupUsers == 5)
        #expect(result.operations.keys.sorted() == ["signin"])
        let state = fake.snapshot
        #expect(state.signups == 5)
        #expect(state.signins == 40)
    }

    @Test func meUsesTokensFromSetup() async throws {
        let fake = FakeGateway()
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .me, requests: 50, concurrency: 4, setupUsers: 2)).run()
        }
        #expect(result.totalRequests == 50)
        #expect(result.successfulRequests == 50)
        #expect(result.failedRequests == 0)
        let state = fake.snapshot
        #expect(state.meCalls == 50)
        #expect(state.signups == 2)
        #expect(state.signins == 2)  // two more virtual users than setup users: each gets its own session
    }

    @Test func meRenewsAccessTokensBeforeTheyExpire() async throws {
        // Tokens live 2 s on the fake; a 3 s run must renew them (unrecorded) rather than send expired ones.
        let fake = FakeGateway(accessTokenLifetime: 2)
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .me, requests: nil, concurrency: 2, setupUsers: 2, duration: 3)).run()
        }
        #expect(result.totalRequests > 0)
        #expect(result.failedRequests == 0, "\(result.errorSamples)")
        #expect(result.sessionRenewals >= 2)
        let state = fake.snapshot
        #expect(state.expiredAccessTokens == 0)
        #expect(state.reusedRefreshTokens == 0)
    }

    @Test func refreshRotatesAndNeverReusesAToken() async throws {
        let fake = FakeGateway()
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .refresh, requests: 120, concurrency: 6, setupUsers: 3)).run()
        }
        #expect(result.totalRequests == 120)
        #expect(result.successfulRequests == 120)
        #expect(result.failedRequests == 0)
        #expect(result.sessionRecoveries == 0)
        let state = fake.snapshot
        #expect(state.reusedRefreshTokens == 0)
        #expect(state.refreshes == 120)
    }

    @Test func mixedRunsEveryWeightedOperation() async throws {
        let fake = FakeGateway()
        var config = small("", .mixed, requests: 400, concurrency: 4, setupUsers: 4)
        config.mix = try MixWeights(parsing: "me=40,refresh=30,signin=20,signup=10")
        let result = try await fake.serve { url in
            config.url = url
            return try await LoadRunner(config).run()
        }
        #expect(result.totalRequests == 400)
        #expect(result.failedRequests == 0)
        #expect(result.mix == "me=40,refresh=30,signin=20,signup=10")
        #expect(Set(result.operations.keys) == ["me", "refresh", "signin", "signup"])
        #expect(result.operations.values.map(\.totalRequests).reduce(0, +) == 400)
        #expect(fake.snapshot.reusedRefreshTokens == 0)
    }

    @Test func reportAndJSONCarryTheSameFigures() async throws {
        let fake = FakeGateway()
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .mixed, requests: 60, concurrency: 3, setupUsers: 3)).run()
        }
        let decoded = try JSONDecoder().decode(LoadResult.self, from: Data(result.json().utf8))
        #expect(decoded.totalRequests == 60)
        #expect(decoded.successfulRequests == result.successfulRequests)
        #expect(decoded.latencyMs == result.latencyMs)
        #expect(decoded.operations == result.operations)
        #expect(!result.json().contains("\n"))
        let text = result.textReport()
        #expect(text.contains("60 total, 60 successful, 0 failed"))
        #expect(text.contains("per operation"))
        #expect(text.contains("p99.9"))
    }

    @Test func rawGetChecks200AndSendsTheBearer() async throws {
        let fake = FakeGateway()
        var config = small("", .rawGet, requests: 25)
        config.path = "/healthz"
        config.bearer = "t0ken"
        let result = try await fake.serve { url in
            config.url = url
            return try await LoadRunner(config).run()
        }
        #expect(result.successfulRequests == 25)
        #expect(fake.snapshot.healthz == 25)
        #expect(fake.snapshot.healthzAuthorization == "Bearer t0ken")
    }
}

@Suite("Errors are errors, never throughput")
struct ErrorTests {
    @Test func status500IsCountedByStatus() async throws {
        let fake = FakeGateway()
        var config = small("", .rawGet, requests: 20)
        config.path = "/fail"
        let result = try await fake.serve { url in
            config.url = url
            return try await LoadRunner(config).run()
        }
        #expect(result.totalRequests == 20)
        #expect(result.successfulRequests == 0)
        #expect(result.failedRequests == 20)
        #expect(result.throughput == 0)
        #expect(result.errorsByStatus == ["500": 20])
        #expect(result.errorLatencyMs.count == 20)
        #expect(result.latencyMs.count == 0)
        #expect(result.errorSamples["500"]?.contains("internal") == true)
    }

    @Test func overloadDuringSignupIsCountedAs503() async throws {
        let fake = FakeGateway(faults: .signupOverloaded)
        let result = try await fake.serve { url in try await LoadRunner(small(url, .signup, requests: 10)).run() }
        #expect(result.successfulRequests == 0)
        #expect(result.errorsByStatus == ["503": 10])
    }

    @Test func busyBackoffWaitsAfterA503() async throws {
        let fake = FakeGateway(faults: .signupOverloaded)
        let result = try await fake.serve { url in
            var config = small(url, .signup, requests: nil, concurrency: 2, duration: 1)
            config.busyBackoff = 0.4
            return try await LoadRunner(config).run()
        }
        // 2 users for 1 s, each waiting 0.4 s after every 503: at most 3 requests each.
        #expect(result.errorsByStatus["503"].map { (2...6).contains($0) } == true, "\(result.errorsByStatus)")
        var invalid = small("http://127.0.0.1:1", .signup)
        invalid.busyBackoff = -1
        #expect(throws: LoadError.self) { try invalid.validate() }
    }

    @Test func wrongBodyIsBadBody() async throws {
        let fake = FakeGateway(faults: .meWithoutID)
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .me, requests: 20, setupUsers: 4)).run()
        }
        #expect(result.totalRequests == 20)
        #expect(result.successfulRequests == 0)
        #expect(result.errorsByKind == ["bad_body": 20])
        #expect(result.errorsByStatus.isEmpty)
        #expect(result.throughput == 0)
    }

    @Test func refreshWithoutRotationIsBadBodyAndTheTokenIsNotReused() async throws {
        let fake = FakeGateway(faults: .refreshWithoutRotation)
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .refresh, requests: 12, concurrency: 3, setupUsers: 3)).run()
        }
        #expect(result.totalRequests == 12)
        #expect(result.successfulRequests == 0)
        #expect(result.errorsByKind == ["bad_body": 12])
        // A token whose rotation failed is never presented again: the user signs in for a new session.
        #expect(result.sessionRecoveries >= 9)
    }

    @Test(arguments: HTTPEngine.allCases)
    func connectionRefusedIsCountedByKind(engine: HTTPEngine) async throws {
        // Port 1 on loopback: nothing listens there.
        var config = small("http://127.0.0.1:1", .rawGet, requests: 8, concurrency: 2)
        config.engine = engine
        let result = try await LoadRunner(config).run()
        #expect(result.totalRequests == 8)
        #expect(result.successfulRequests == 0)
        #expect(result.errorsByKind["connect"] == 8, "\(result.errorsByKind) \(result.errorSamples)")
    }

    @Test func setupFailureStopsTheRunWithAClearError() async throws {
        let fake = FakeGateway()
        var config = small("", .signin, requests: 5, concurrency: 1, setupUsers: 1)
        config.password = "short"  // the fake answers 400 weak_password
        let error = try await fake.serve { url in
            config.url = url
            do {
                _ = try await LoadRunner(config).run()
                return nil as LoadError?
            } catch {
                return error as? LoadError
            }
        }
        guard case .setupFailed(let message) = error else {
            Issue.record("expected setupFailed, got \(String(describing: error))")
            return
        }
        #expect(message.contains("400"))
        #expect(fake.snapshot.signins == 0)
    }
}

@Suite("Bounds")
struct BoundTests {
    @Test func requestBoundStopsTheRun() async throws {
        let fake = FakeGateway()
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .rawGet, requests: 100, concurrency: 8, duration: 3600)).run()
        }
        #expect(result.totalRequests == 100)
        #expect(result.stoppedBy == "requests")
        #expect(fake.snapshot.healthz == 100)
    }

    @Test func sixtyFourVirtualUsersShareOneClient() async throws {
        let fake = FakeGateway()
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .refresh, requests: 1000, concurrency: 64, setupUsers: 16)).run()
        }
        #expect(result.totalRequests == 1000)
        #expect(result.failedRequests == 0, "\(result.errorSamples)")
        #expect(fake.snapshot.reusedRefreshTokens == 0)
        #expect(fake.snapshot.signins == 48)  // 64 virtual users, 16 from sign-up, 48 more sessions
    }

    @Test func durationBoundStopsTheRun() async throws {
        let fake = FakeGateway()
        let result = try await fake.serve { url in
            try await LoadRunner(small(url, .rawGet, requests: nil, concurrency: 2, duration: 0.5)).run()
        }
        #expect(result.stoppedBy == "duration")
        #expect(result.totalRequests > 0)
        #expect(result.elapsedSeconds >= 0.4)
        #expect(result.elapsedSeconds < 10)  // duration plus at most one request timeout
    }

    @Test func warmupIsNotRecorded() async throws {
        let fake = FakeGateway()
        var config = small("", .rawGet, requests: 10, concurrency: 2)
        config.warmup = 0.3
        let result = try await fake.serve { url in
            config.url = url
            return try await LoadRunner(config).run()
        }
        #expect(result.totalRequests == 10)
        #expect(fake.snapshot.healthz > 10)
    }

    @Test func configurationLimits() throws {
        #expect(throws: LoadError.self) { try LoadConfiguration(scenario: .me, duration: 3601).validate() }
        #expect(throws: LoadError.self) { try LoadConfiguration(scenario: .me, duration: 0).validate() }
        #expect(throws: LoadError.self) { try LoadConfiguration(scenario: .me, concurrency: 0).validate() }
        #expect(throws: LoadError.self) { try LoadConfiguration(scenario: .me, maxRequests: 0).validate() }
        #expect(throws: LoadError.self) { try LoadConfiguration(scenario: .rawGet, path: "healthz").validate() }
        try LoadConfiguration(scenario: .me).validate()
    }

    @Test func mixParsing() throws {
        let mix = try MixWeights(parsing: "me=1, signup=3")
        #expect(mix == MixWeights(me: 1, refresh: 0, signin: 0, signup: 3))
        #expect(mix.pick(0) == .me)
        #expect(mix.pick(1) == .signup)
        #expect(mix.pick(3) == .signup)
        #expect(throws: LoadError.self) { try MixWeights(parsing: "me=0") }
        #expect(throws: LoadError.self) { try MixWeights(parsing: "delete=3") }
        #expect(throws: LoadError.self) { try MixWeights(parsing: "me=-1") }
    }
}
