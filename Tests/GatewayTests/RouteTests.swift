import Foundation
import GatehouseContracts
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing
import CoreMetrics

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
            // Raw settings JSON is passed through byte for byte (note `1.50`).
            #expect(r.text.contains(#""settings":{"theme":"dark","n":1.50}"#))
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

            // Reusing the old refresh token is detected by the backend and mapped to 401.
            let reused = try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh)"}"#)
            try reused.expectProblem(.unauthorized, "refresh_token_reused")
            #expect(reused.headers[.wwwAuthenticate] == #"Bearer realm="gatehouse", error="invalid_token""#)

            let out = try await h.request(.delete, "/v1/sessions/current", token: access)
            #expect(out.status == .noContent)
            // The gateway refuses the token of the session it just revoked, without waiting for the feed.
            try await h.request(.get, "/v1/me", token: access).expectProblem(.unauthorized, "session_revoked")
        }
    }

    @Test func signOutEverywhereRevokesAllSessions() async throws {
        try await Harness.run { h in
            let (user, session) = try await h.signUp()
            let r = try await h.request(.delete, "/v1/sessions", token: session["accessToken"] as? String)
            #expect(r.status == .noContent)
            let id = user["id"] as! String
            let revoked = h.backend.state.withLock { s in s.revokedCalls.allSatisfy { s.sessions[$0]?.userID == id } && !s.revokedCalls.isEmpty }
            #expect(revoked)
        }
    }

    @Test func passwordStrength() async throws {
        try await Harness.run { h in
            let r = try await h.request(.post, "/v1/password-strength", json: #"{"password":"abcdefgh"}"#)
            #expect(r.status == .ok)
            #expect(r.text == #"{"score":2,"feedback":["Use a longer password."]}"#)
        }
    }

    @Test func discoveryAndOperations() async throws {
        try await Harness.run { h in
            let jwks = try await h.request(.get, "/.well-known/jwks.json")
            #expect(jwks.status == .ok)
            #expect(jwks.headers[.cacheControl] == "public, max-age=300")
            #expect(jwks.text == (try await h.backend.jwks()))

            let oidc = try await h.request(.get, "/.well-known/openid-configuration")
            #expect(oidc.status == .ok)
            let doc = try oidc.object()
            #expect(doc["issuer"] as? String == "https://auth.test")
            #expect(doc["jwks_uri"] as? String == "https://auth.test/.well-known/jwks.json")
            #expect(doc["id_token_signing_alg_values_supported"] as? [String] == ["ES256", "EdDSA", "RS256"])

            let health = try await h.request(.get, "/healthz")
            #expect(health.status == .ok)
            #expect(health.text == #"{"status":"ok"}"#)

            #expect(try await h.request(.get, "/readyz").status == .ok)
            h.backend.setReady(false)
            #expect(try await h.request(.get, "/readyz").status == .serviceUnavailable)

            let api = try await h.request(.get, "/openapi.json")
            #expect(api.status == .ok)
            #expect(try api.object()["openapi"] as? String == "3.1.0")
        }
    }

    @Test func jwksServedStaleWhileTokenServiceIsDown() async throws {
        try await Harness.run { h in
            h.backend.setJWKSFails(true)
            try await h.request(.get, "/.well-known/jwks.json").expectProblem(.serviceUnavailable, "service_unavailable")
            h.backend.setJWKSFails(false)
            let fresh = try await h.request(.get, "/.well-known/jwks.json")
            #expect(fresh.status == .ok)
            h.backend.setJWKSFails(true)
            h.clock.advance(120)  // past the cache TTL
            let stale = try await h.request(.get, "/.well-known/jwks.json")
            #expect(stale.status == .ok)
            #expect(stale.text == fresh.text)
            // Tokens signed with known keys still verify while the token service is down.
            h.backend.setJWKSFails(false)
            let (_, session) = try await h.signUp()
            h.backend.setJWKSFails(true)
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
            h.backend.state.withLock { $0.holdSignIns = true }
            async let first = h.request(.post, "/v1/sessions", json: body)
            async let second = h.request(.post, "/v1/sessions", json: body)
            while h.backend.state.withLock({ $0.waitingSignIns }) < 2 { try await Task.sleep(for: .milliseconds(2)) }
            // Both places taken: the next sign-in and sign-up are refused without reaching the backend.
            for (path, json) in [("/v1/sessions", body), ("/v1/accounts", #"{"email":"new@example.com","password":"a fine long password"}"#)] {
                let refused = try await h.request(.post, path, json: json)
                _ = try refused.expectProblem(.serviceUnavailable, "overloaded")
                #expect(refused.headers[.retryAfter] == "1")
            }
            #expect(h.backend.state.withLock { $0.users.isEmpty })
            h.backend.state.withLock { $0.holdSignIns = false }
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
            h.backend.state.withLock {
                $0.hashPool = HashPoolStats(workers: 2, busyWorkers: 2, queueDepth: 17, queueLimit: 64, completed: 120, rejected: 3)
            }
            var text = try await h.request(.get, "/metrics").text
            #expect(text.contains("gatehouse_identity_stats_up 1"), "\(text)")
            #expect(text.contains("gatehouse_identity_hash_pool_queue_depth 17"))
            #expect(text.contains("gatehouse_identity_hash_pool_queue_limit 64"))
            #expect(text.contains("gatehouse_identity_hash_pool_busy_workers 2"))
            #expect(text.contains("gatehouse_identity_hash_pool_workers 2"))
            #expect(text.contains("gatehouse_identity_hash_pool_completed_jobs 120"))
            #expect(text.contains("gatehouse_identity_hash_pool_rejected_jobs 3"))
            // The queue drains: the next scrape shows it.
            h.backend.state.withLock { $0.hashPool?.queueDepth = 0 }
            text = try await h.request(.get, "/metrics").text
            #expect(text.contains("gatehouse_identity_hash_pool_queue_depth 0"))
            // The identity service stops answering: up drops to 0, the scrape still succeeds.
            h.backend.state.withLock { $0.hashPool = nil }
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
            let client = try #require(h.backend.state.withLock { $0.lastClient })
            #expect(client.userAgent == String(repeating: "é", count: 256))
            #expect(client.ip != "203.0.113.9")  // not trusted by default
        }
        try await Harness.run(configure: { $0.trustForwardedFor = true }) { h in
            _ = try await h.request(.post, "/v1/sessions", json: body, headers: [.xForwardedFor: "198.51.100.1, 203.0.113.9"])
            #expect(h.backend.state.withLock { $0.lastClient }?.ip == "203.0.113.9")
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
            let served = Set(h.parts.routes.all.map { "\($0.method.rawValue) \($0.path)" })
            #expect(documented == served, "only documented: \(documented.subtracting(served)); only served: \(served.subtracting(documented))")
        }
    }

    @Test func embeddedOpenAPIMatchesRepositoryFile() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/Gateway/Resources/openapi.json")
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(
            text.trimmingCharacters(in: .whitespacesAndNewlines) == OpenAPIDocument.json.trimmingCharacters(in: .whitespacesAndNewlines),
            "run scripts/embed-openapi")
    }
}

typealias CoreMetricsTimer = CoreMetrics.Timer
