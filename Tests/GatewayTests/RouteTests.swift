import Foundation
import GatehouseContracts
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IdentityService
import Prometheus
import Testing
import CoreMetrics
import Synchronization
import GatehouseTestSupport
import TokenService

@testable import Gateway

@Suite struct RouteTests {
    @Test func signUpReturnsUserAndSession() async throws {
        try await Harness.run { h in
            let r = try await h.request(
                .post, "/v1/accounts", json: #"{"email":"ada@example.com","password":"correct horse","displayName":"Ada"}"#,
                headers: [.userAgent: "tests/1.0"])
            #expect(r.status == .created)
            #expect(r.headers[.contentType] == "application/json; charset=utf-8")
            #expect(r.headers[.cacheControl] == "no-store")
            #expect(r.text.contains(#""settings":{}"#))
            let body = try r.object()
            let user = try #require(body["user"] as? [String: Any])
            #expect(user["email"] as? String == "ada@example.com")
            #expect(user["displayName"] as? String == "Ada")
            #expect(user["emailVerified"] as? Bool == false)
            #expect(user["photoURL"] is NSNull)
            #expect(user["createdAt"] as? String == "2023-11-14T22:13:20Z")
            let session = try #require(body["session"] as? [String: Any])
            #expect(session["tokenType"] as? String == "Bearer")
            #expect(session["expiresIn"] as? Int == 900)
            #expect((session["accessToken"] as? String)?.split(separator: ".").count == 3)
            #expect(session["refreshToken"] is String)
            #expect(session["sessionID"] == nil)
        }
    }

    @Test func signInMeRefreshAndSignOut() async throws {
        try await Harness.run { h in
            _ = try await h.signUp()
            let r = try await h.request(.post, "/v1/sessions", json: #"{"email":"ada@example.com","password":"correct horse battery"}"#)
            #expect(r.status == .ok)
            let session = try #require(try r.object()["session"] as? [String: Any])
            let access = session["accessToken"] as! String
            let refresh = session["refreshToken"] as! String

            let me = try await h.request(.get, "/v1/me", token: access)
            #expect(me.status == .ok)
            #expect(try me.object()["email"] as? String == "ada@example.com")

            let patched = try await h.request(
                .patch, "/v1/me", json: #"{"displayName":"Ada L.","settings":{"lang":"en","beta":true}}"#, token: access)
            #expect(patched.status == .ok)
            let user = try patched.object()
            #expect(user["displayName"] as? String == "Ada L.")
            #expect(user["settings"] as? [String: Bool] == nil)
            #expect((user["settings"] as? [String: Any])?["lang"] as? String == "en")

            let refreshed = try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh)"}"#)
            #expect(refreshed.status == .ok)
            let newSession = try #require(try refreshed.object()["session"] as? [String: Any])
            #expect(newSession["refreshToken"] as? String != refresh)
            #expect(try refreshed.object()["user"] == nil)

            // Reusing the old refresh token after the grace window is detected by the token service
            // and mapped to 401.
            h.clock.advance(by: 11)
            let reused = try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh)"}"#)
            try reused.expectProblem(.unauthorized, "refresh_token_reused")
            #expect(reused.headers[.wwwAuthenticate] == #"Bearer realm="gatehouse", error="invalid_token""#)

            // Reuse revoked the session; sign out of a new one.
            let again = try await h.request(.post, "/v1/sessions", json: #"{"email":"ada@example.com","password":"correct horse battery"}"#)
            let current = try #require(try again.object()["session"] as? [String: Any])["accessToken"] as? String
            let out = try await h.request(.delete, "/v1/sessions/current", token: current)
            #expect(out.status == .noContent)
            // The gateway refuses the token of the session it just revoked, without waiting for the feed.
            try await h.request(.get, "/v1/me", token: current).expectProblem(.unauthorized, "session_revoked")
        }
    }

    @Test func signOutEverywhereRevokesAllSessions() async throws {
        try await Harness.run { h in
            let (user, session) = try await h.signUp()
            let r = try await h.request(.delete, "/v1/sessions", token: session["accessToken"] as? String)
            #expect(r.status == .noContent)
            let id = user["id"] as! String
            let sessions = try await h.services.token.listSessions(UserSessionsRequest(userID: id)).sessions
            #expect(!sessions.isEmpty)
            #expect(sessions.allSatisfy { $0.revokedAt != nil })
        }
    }

    @Test func passwordStrength() async throws {
        try await Harness.run { h in
            let r = try await h.request(.post, "/v1/password-strength", json: #"{"password":"abcdefgh"}"#)
            #expect(r.status == .ok)
            // The identity service's answer, as {score, level, feedback}.
            let expected = h.services.identityHandlers.accounts.passwordStrength(PasswordStrengthRequest(password: "abcdefgh"))
            #expect(!expected.reasons.isEmpty)
            let body = try r.object()
            #expect(body["score"] as? Int == Int(expected.score))
            #expect(body["level"] as? String == "weak")
            #expect(body["feedback"] as? [String] == expected.reasons.map(\.message))
            #expect(body.count == 3)
        }
    }

    @Test("A9: the level beside the score, for a three-bar meter")
    func passwordStrengthLevel() async throws {
        try await Harness.run { h in
            for (password, level) in [("password", "weak"), ("Password1", "weak"), ("quixotic pelican marmalade zeppelin fjord", "strong")] {
                let r = try await h.request(.post, "/v1/password-strength", json: #"{"password":"\#(password)"}"#)
                #expect(r.status == .ok)
                #expect(try r.object()["level"] as? String == level, "\(password)")
            }
        }
    }

    @Test func discoveryAndOperations() async throws {
        try await Harness.run { h in
            let jwks = try await h.request(.get, "/.well-known/jwks.json")
            #expect(jwks.status == .ok)
            #expect(jwks.headers[.cacheControl] == "public, max-age=300")
            let keys = try #require(try jwks.object()["keys"] as? [[String: Any]])
            // The token service's key and the test signer's.
            #expect(keys.count == 2)
            #expect(keys.allSatisfy { $0["alg"] as? String == "ES256" && $0["kid"] is String })

            let oidc = try await h.request(.get, "/.well-known/openid-configuration")
            #expect(oidc.status == .ok)
            let doc = try oidc.object()
            #expect(doc["issuer"] as? String == "https://auth.test")
            #expect(doc["jwks_uri"] as? String == "https://auth.test/.well-known/jwks.json")
            #expect(doc["id_token_signing_alg_values_supported"] as? [String] == ["ES256", "EdDSA", "RS256"])

            let health = try await h.request(.get, "/healthz")
            #expect(health.status == .ok)
            #expect(health.text == #"{"status":"ok"}"#)

            // Ready once the revocation state has loaded (asynchronously, at start) and both
            // services answer their probes: waited for, since a loaded machine may take a moment.
            try await waitUntil("/readyz 200") { try await h.request(.get, "/readyz").status == .ok }
            h.services.fail(IdentityAPI.getUser, with: RPCError(.unavailable, "down"))
            #expect(try await h.request(.get, "/readyz").status == .serviceUnavailable)
            h.services.fail(IdentityAPI.getUser, with: nil)
            h.services.fail(TokenAPI.jwks, with: RPCError(.deadlineExceeded, "slow"))
            #expect(try await h.request(.get, "/readyz").status == .serviceUnavailable)
            h.services.fail(TokenAPI.jwks, with: nil)
            try await waitUntil("/readyz 200 again") { try await h.request(.get, "/readyz").status == .ok }

            let api = try await h.request(.get, "/openapi.json")
            #expect(api.status == .ok)
            #expect(try api.object()["openapi"] as? String == "3.2.0")
        }
    }

    @Test func jwksServedStaleWhileTokenServiceIsDown() async throws {
        try await Harness.run { h in
            h.services.fail(TokenAPI.jwks, with: RPCError(.unavailable, "token service down"))
            try await h.request(.get, "/.well-known/jwks.json").expectProblem(.serviceUnavailable, "service_unavailable")
            h.services.fail(TokenAPI.jwks, with: nil)
            let fresh = try await h.request(.get, "/.well-known/jwks.json")
            #expect(fresh.status == .ok)
            h.services.fail(TokenAPI.jwks, with: RPCError(.unavailable, "token service down"))
            h.clock.advance(by: 120)  // past the cache TTL
            let stale = try await h.request(.get, "/.well-known/jwks.json")
            #expect(stale.status == .ok)
            #expect(stale.text == fresh.text)
            // Tokens signed with known keys still verify while the token service is down.
            h.services.fail(TokenAPI.jwks, with: nil)
            let (_, session) = try await h.signUp()
            h.services.fail(TokenAPI.jwks, with: RPCError(.unavailable, "token service down"))
            #expect(try await h.request(.get, "/v1/me", token: session["accessToken"] as? String).status == .ok)
        }
    }

    @Test func metricsSystemBootstrapIsIdempotent() {
        let first = GatewayMetrics()
        let second = GatewayMetrics()
        let results = [first.bootstrapMetricsSystem(), second.bootstrapMetricsSystem(), first.bootstrapMetricsSystem()]
        #expect(results.filter { $0 }.count <= 1)  // at most one call (in this process) bootstraps
        #expect(!results[1] && !results[2])
    }

    @Test func metricsCountRequests() async throws {
        try await Harness.run { h in
            _ = try await h.request(.get, "/healthz")
            _ = try await h.request(.get, "/healthz")
            _ = try await h.request(.get, "/nope")
            let r = try await h.request(.get, "/metrics")
            #expect(r.status == .ok)
            #expect(r.headers[.contentType]?.hasPrefix("text/plain") == true)
            #expect(r.text.contains(#"gatehouse_http_requests_total{route="/healthz",method="GET",status="200"} 2"#), "\(r.text)")
            #expect(r.text.contains(#"gatehouse_http_requests_total{route="unmatched",method="GET",status="404"} 1"#))
            #expect(r.text.contains("gatehouse_http_request_duration_seconds_bucket"))
            // The factory writes into the same registry (for swift-metrics users in the process).
            let timer = CoreMetricsTimer(label: "gatehouse_test_duration_seconds", dimensions: [("method", "x")], factory: h.metrics.factory)
            timer.recordMilliseconds(3)
            #expect(h.metrics.registry.emitToString().contains("gatehouse_test_duration_seconds"))
        }
    }

    @Test func passwordRequestsPastTheGatewayBoundGetOverloadedAtOnce() async throws {
        try await Harness.run(configure: { $0.maxPasswordRequests = 2 }) { h in
            let body = #"{"email":"nobody@example.com","password":"whatever pw"}"#
            let gate = Gate()
            h.services.before(IdentityAPI.signIn) { await gate.wait() }
            async let first = h.request(.post, "/v1/sessions", json: body)
            async let second = h.request(.post, "/v1/sessions", json: body)
            try await gate.waitForWaiters(2)
            // Both places taken: the next sign-in and sign-up are refused without reaching the backend.
            for (path, json) in [("/v1/sessions", body), ("/v1/accounts", #"{"email":"new@example.com","password":"a fine long password"}"#)] {
                let refused = try await h.request(.post, path, json: json)
                _ = try refused.expectProblem(.serviceUnavailable, "overloaded")
                #expect(refused.headers[.retryAfter] == "1")
            }
            #expect(h.services.calls(to: IdentityAPI.signUp) == 0)
            #expect(h.services.calls(to: IdentityAPI.signIn) == 2)
            gate.open()
            #expect(try await first.status == .unauthorized)
            #expect(try await second.status == .unauthorized)
            // The places are given back.
            #expect(try await h.request(.post, "/v1/sessions", json: body).status == .unauthorized)
            #expect(try await h.request(.post, "/v1/sessions", json: body).status == .unauthorized)
        }
    }

    @Test func metricsShowRPCLatencyByMethodAndOutcome() async throws {
        try await Harness.run { h in
            h.metrics.recordRPC(service: "identity", method: "identity.signIn", code: "ok", duration: .microseconds(800))
            h.metrics.recordRPC(service: "identity", method: "identity.signIn", code: "invalid_credentials", duration: .milliseconds(30))
            let text = try await h.request(.get, "/metrics").text
            #expect(text.contains(#"gatehouse_rpc_call_duration_seconds_count{service="identity",method="identity.signIn",code="ok"} 1"#), "\(text)")
            #expect(text.contains(#"gatehouse_rpc_call_duration_seconds_count{service="identity",method="identity.signIn",code="invalid_credentials"} 1"#))
            // 800 µs falls in the 1 ms bucket, not in the 500 µs one.
            #expect(text.contains(#"gatehouse_rpc_call_duration_seconds_bucket{service="identity",method="identity.signIn",code="ok",le="0.0005"} 0"#))
            #expect(text.contains(#"gatehouse_rpc_call_duration_seconds_bucket{service="identity",method="identity.signIn",code="ok",le="0.001"} 1"#))
        }
    }

    @Test func metricsAskTheIdentityServiceForTheHashPoolAtEachScrape() async throws {
        try await Harness.run { h in
            let stats = Mutex(IdentityStats(
                hashWorkers: 2, hashBusyWorkers: 2, hashQueueDepth: 17, hashQueueLimit: 64, hashCompleted: 120, hashRejected: 3))
            h.services.override(IdentityAPI.stats) { _ in stats.withLock { $0 } }
            var text = try await h.request(.get, "/metrics").text
            #expect(text.contains("gatehouse_identity_stats_up 1"), "\(text)")
            #expect(text.contains("gatehouse_identity_hash_pool_queue_depth 17"))
            #expect(text.contains("gatehouse_identity_hash_pool_queue_limit 64"))
            #expect(text.contains("gatehouse_identity_hash_pool_busy_workers 2"))
            #expect(text.contains("gatehouse_identity_hash_pool_workers 2"))
            #expect(text.contains("gatehouse_identity_hash_pool_completed_jobs 120"))
            #expect(text.contains("gatehouse_identity_hash_pool_rejected_jobs 3"))
            // The queue drains: the next scrape shows it.
            stats.withLock { $0.hashQueueDepth = 0 }
            text = try await h.request(.get, "/metrics").text
            #expect(text.contains("gatehouse_identity_hash_pool_queue_depth 0"))
            // The identity service stops answering: up drops to 0, the scrape still succeeds.
            h.services.fail(IdentityAPI.stats, with: RPCError(.unavailable, "down"))
            let r = try await h.request(.get, "/metrics")
            #expect(r.status == .ok)
            #expect(r.text.contains("gatehouse_identity_stats_up 0"))
        }
    }

    @Test func clientInfoForwarded() async throws {
        let body = #"{"email":"x@example.com","password":"whatever pw"}"#
        let longAgent = String(repeating: "é", count: 300)  // 600 bytes
        try await Harness.run { h in
            _ = try await h.request(.post, "/v1/sessions", json: body, headers: [.userAgent: longAgent, .xForwardedFor: "203.0.113.9"])
            let client = try #require(h.services.lastRequest(IdentityAPI.signIn)?.client)
            #expect(client.userAgent == String(repeating: "é", count: 256))
            #expect(client.ip != "203.0.113.9")  // not trusted by default
        }
        // The loopback peer is a trusted proxy: the rightmost forwarded entry is the client.
        try await Harness.run(.live, configure: { $0.trustedProxies = try! TrustedProxies(["127.0.0.1", "::1"]) }) { h in
            _ = try await h.request(.post, "/v1/sessions", json: body, headers: [.xForwardedFor: "198.51.100.1, 203.0.113.9"])
            #expect(h.services.lastRequest(IdentityAPI.signIn)?.client.ip == "203.0.113.9")
        }
    }

    @Test func requestIDIsEchoedOrGenerated() async throws {
        try await Harness.run { h in
            let echoed = try await h.request(.get, "/healthz", headers: [.xRequestID: "abc-123.X:y_z"])
            #expect(echoed.headers[.xRequestID] == "abc-123.X:y_z")
            let unsafe = try await h.request(.get, "/healthz", headers: [.xRequestID: "bad id<script>"])
            #expect(unsafe.headers[.xRequestID] != "bad id<script>")
            #expect(unsafe.headers[.xRequestID]?.count == 32)
            let long = try await h.request(.get, "/healthz", headers: [.xRequestID: String(repeating: "a", count: 129)])
            #expect(long.headers[.xRequestID]?.count == 32)
            let none = try await h.request(.get, "/nope")
            #expect(none.headers[.xRequestID]?.count == 32)
        }
    }

    @Test func corsPreflightAllowedAndRefused() async throws {
        try await Harness.run(configure: { $0.allowedOrigins = ["https://app.example.com"] }) { h in
            let ok = try await h.request(
                .options, "/v1/sessions",
                headers: [.origin: "https://app.example.com", .accessControlRequestMethod: "POST"])
            #expect(ok.status == .noContent)
            #expect(ok.headers[.accessControlAllowOrigin] == "https://app.example.com")
            #expect(ok.headers[.accessControlAllowMethods] == "GET, POST, PATCH, DELETE")
            #expect(ok.headers[.accessControlAllowHeaders]?.contains("Authorization") == true)

            let refused = try await h.request(
                .options, "/v1/sessions", headers: [.origin: "https://evil.example", .accessControlRequestMethod: "POST"])
            try refused.expectProblem(.forbidden, "origin_not_allowed")
            #expect(refused.headers[.accessControlAllowOrigin] == nil)

            let simple = try await h.request(.get, "/healthz", headers: [.origin: "https://app.example.com"])
            #expect(simple.headers[.accessControlAllowOrigin] == "https://app.example.com")
            #expect(simple.headers[.accessControlExposeHeaders]?.contains("X-Request-Id") == true)
            let error = try await h.request(.get, "/v1/me", headers: [.origin: "https://app.example.com"])
            #expect(error.status == .unauthorized)
            #expect(error.headers[.accessControlAllowOrigin] == "https://app.example.com")
            let other = try await h.request(.get, "/healthz", headers: [.origin: "https://evil.example"])
            #expect(other.headers[.accessControlAllowOrigin] == nil)
        }
    }

    @Test func noOriginsAllowedByDefault() async throws {
        try await Harness.run { h in
            let r = try await h.request(
                .options, "/v1/sessions", headers: [.origin: "https://app.example.com", .accessControlRequestMethod: "POST"])
            try r.expectProblem(.forbidden, "origin_not_allowed")
        }
    }

    @Test func openAPIDocumentMatchesRoutes() async throws {
        try await Harness.run { h in
            let doc = try #require(JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json.utf8)) as? [String: Any])
            let paths = try #require(doc["paths"] as? [String: [String: Any]])
            let documented = Set(paths.flatMap { path, ops in ops.keys.map { "\($0.uppercased()) \(path)" } })
            // A router parameter `:name` is `{name}` in OpenAPI.
            let served = Set(h.parts.routes.all.map { route in
                let path = route.path.split(separator: "/", omittingEmptySubsequences: false)
                    .map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }.joined(separator: "/")
                return "\(route.method.rawValue) \(path)"
            })
            #expect(documented == served, "only documented: \(documented.subtracting(served)); only served: \(served.subtracting(documented))")
        }
    }

    @Test func embeddedOpenAPIMatchesRepositoryFile() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/Gateway/Resources/openapi.json")
        let repository = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? NSDictionary
        let embedded = try JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json.utf8)) as? NSDictionary
        #expect(repository != nil)
        #expect(repository == embedded, "run scripts/embed-openapi")
    }
}

typealias CoreMetricsTimer = CoreMetrics.Timer
