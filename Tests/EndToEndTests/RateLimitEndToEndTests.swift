import Foundation
import GatehouseTestSupport
import Testing

@Suite("Rate limits over real processes", .serialized)
struct RateLimitEndToEndTests {
    @Test("20 wrong passwords get too_many_attempts, for an account and a missing email alike; another account is unaffected; per-address limits follow trusted X-Forwarded-For")
    func throttling() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: [
            "GATEHOUSE_ACCOUNT_THROTTLE_FAILURES": "3", "GATEHOUSE_ACCOUNT_THROTTLE_BASE_DELAY": "60",
            "GATEHOUSE_ACCOUNT_THROTTLE_MAX_DELAY": "120",
        ])
        try stack.start("token")
        try stack.start("gateway", environment: [
            "GATEHOUSE_TRUSTED_PROXIES": "127.0.0.1, ::1", "GATEHOUSE_RATE_LIMIT_PASSWORD_STRENGTH": "2/min burst=2",
        ])
        try await stack.waitReady()
        let password = "correct horse battery"
        for email in ["alice@example.com", "bob@example.com"] {
            #expect(try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": password]).status == 201)
        }

        /// Twenty wrong passwords: each answer as `status code`.
        func guesses(_ email: String) async throws -> [String] {
            var answers: [String] = []
            for i in 0..<20 {
                let r = try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": "guess number \(i)"])
                answers.append("\(r.status) \(r.json["code"] as? String ?? "?")")
                if r.status == 429 {
                    let retry = Int(r.headers["retry-after"] ?? "") ?? 0
                    #expect((1...60).contains(retry), "Retry-After \(r.headers["retry-after"] ?? "none")")
                }
            }
            return answers
        }
        let expected = Array(repeating: "401 invalid_credentials", count: 3) + Array(repeating: "429 too_many_attempts", count: 17)
        #expect(try await guesses("alice@example.com") == expected)
        #expect(try await guesses("nobody-here@example.com") == expected)
        // Even the right password waits now; another account signs in as usual.
        let owner = try await stack.request("POST", "/v1/sessions", json: ["email": "alice@example.com", "password": password])
        #expect(owner.status == 429 && owner.json["code"] as? String == "too_many_attempts")
        #expect(try await stack.request("POST", "/v1/sessions", json: ["email": "bob@example.com", "password": password]).status == 200)

        // Per-address: the gateway's peer (loopback) is a trusted proxy, so each forwarded client
        // has its own budget of two password-strength checks.
        func strength(_ client: String) async throws -> Stack.Response {
            try await stack.request("POST", "/v1/password-strength", json: ["password": "abc"], headers: ["X-Forwarded-For": client])
        }
        #expect(try await strength("203.0.113.1").status == 200)
        #expect(try await strength("203.0.113.1").status == 200)
        let limited = try await strength("198.51.100.9, 203.0.113.1")
        #expect(limited.status == 429 && limited.json["code"] as? String == "rate_limited")
        #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 >= 1)
        #expect(try await strength("203.0.113.2").status == 200)

        let metrics = String(decoding: try await stack.request("GET", "/metrics").body, as: UTF8.self)
        #expect(metrics.contains(#"gatehouse_http_throttled_requests_total{class="sign_in",reason="account"} 35"#))
        #expect(metrics.contains(#"gatehouse_http_throttled_requests_total{class="password_strength",reason="client_address"} 1"#))
    }
}
