import Foundation
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import Gateway

/// Per-client-address limits over a real HTTP connection (the peer is loopback).
@Suite struct RateLimitTests {
    static let signIn = #"{"email":"nobody@example.com","password":"whatever pw"}"#

    static func limits(_ edit: (inout RateLimits) -> Void = { _ in }) -> RateLimits {
        var limits = RateLimits(
            limits: [.signIn: RateLimit(perSecond: 1.0 / 30, burst: 2), .signUp: RateLimit(perSecond: 1.0 / 60, burst: 1),
                     .passwordStrength: RateLimit(perSecond: 1, burst: 1), .refresh: RateLimit(perSecond: 1.0 / 10, burst: 1)],
            maxClients: 1000)
        edit(&limits)
        return limits
    }

    @Test func eachLimitedRouteAnswers429WithRetryAfterPastItsBudget() async throws {
        try await Harness.run(.live, configure: { $0.rateLimits = Self.limits() }) { h in
            for _ in 0..<2 {
                try await h.request(.post, "/v1/sessions", json: Self.signIn).expectProblem(.unauthorized, "invalid_credentials")
            }
            let refused = try await h.request(.post, "/v1/sessions", json: Self.signIn)
            try refused.expectProblem(.tooManyRequests, "rate_limited")
            #expect(refused.headers[.retryAfter] == "30")
            #expect(h.services.calls(to: IdentityAPI.signIn) == 2)  // refused before the identity service
            // The bucket refills with the (test) clock: one more after 30 s.
            h.clock.advance(by: 30)
            try await h.request(.post, "/v1/sessions", json: Self.signIn).expectProblem(.unauthorized, "invalid_credentials")
            try await h.request(.post, "/v1/sessions", json: Self.signIn).expectProblem(.tooManyRequests, "rate_limited")

            _ = try await h.signUp("amy@example.com")
            let signUp = try await h.request(.post, "/v1/accounts", json: #"{"email":"bo@example.com","password":"correct horse battery"}"#)
            try signUp.expectProblem(.tooManyRequests, "rate_limited")
            #expect(signUp.headers[.retryAfter] == "60")

            let strength = #"{"password":"abc"}"#
            #expect(try await h.request(.post, "/v1/password-strength", json: strength).status == .ok)
            try await h.request(.post, "/v1/password-strength", json: strength).expectProblem(.tooManyRequests, "rate_limited")

            let refresh = #"{"refreshToken":"nope"}"#
            try await h.request(.post, "/v1/sessions/refresh", json: refresh).expectProblem(.unauthorized, "invalid_refresh_token")
            let refreshRefused = try await h.request(.post, "/v1/sessions/refresh", json: refresh)
            try refreshRefused.expectProblem(.tooManyRequests, "rate_limited")
            #expect(refreshRefused.headers[.retryAfter] == "10")

            let metrics = try await h.request(.get, "/metrics").text
            #expect(metrics.contains(#"gatehouse_http_throttled_requests_total{class="sign_in",reason="client_address"} 2"#), "\(metrics)")
            #expect(metrics.contains(#"gatehouse_http_throttled_requests_total{class="sign_up",reason="client_address"} 1"#))
            #expect(metrics.contains(#"gatehouse_http_throttled_requests_total{class="refresh",reason="client_address"} 1"#))
        }
    }

    /// Account changes that hash a password or answer `email_exists` share sign-up's budget;
    /// re-authentication shares sign-in's.
    @Test func accountChangesShareTheSignUpAndSignInBudgets() async throws {
        try await Harness.run(.live, configure: { $0.rateLimits = Self.limits() }) { h in
            let (_, session) = try await h.signUp("amy@example.com")  // the address's one sign-up
            let bearer = try #require(session["accessToken"] as? String)
            let email = try await h.request(.put, "/v1/me/email", json: #"{"email":"amy2@example.com"}"#, token: bearer)
            try email.expectProblem(.tooManyRequests, "rate_limited")
            let password = try await h.request(.put, "/v1/me/password", json: #"{"password":"another long password"}"#, token: bearer)
            try password.expectProblem(.tooManyRequests, "rate_limited")
            #expect(h.services.calls(to: IdentityAPI.changeEmail) == 0 && h.services.calls(to: IdentityAPI.changePassword) == 0)
            for _ in 0..<2 {
                let again = #"{"password":"wrong password"}"#
                try await h.request(.post, "/v1/me/reauthenticate", json: again, token: bearer).expectProblem(.unauthorized, "invalid_credentials")
            }
            try await h.request(.post, "/v1/me/reauthenticate", json: #"{"password":"wrong password"}"#, token: bearer)
                .expectProblem(.tooManyRequests, "rate_limited")
        }
    }

    @Test func getMeAndAnUnlimitedClassAreNeverLimited() async throws {
        try await Harness.run(.live, configure: { $0.rateLimits = Self.limits { $0.limits[.signIn] = nil } }) { h in
            let (_, session) = try await h.signUp()
            for i in 0..<20 {
                #expect(try await h.request(.get, "/v1/me", token: session["accessToken"] as? String).status == .ok)
                // (A new email each time: the identity service's per-account throttle is not under test.)
                try await h.request(.post, "/v1/sessions", json: #"{"email":"n\#(i)@example.com","password":"whatever pw"}"#)
                    .expectProblem(.unauthorized, "invalid_credentials")
            }
        }
    }

    @Test func forwardedForIsIgnoredUnlessThePeerIsATrustedProxy() async throws {
        // Not trusted: a client cannot get a fresh budget by inventing X-Forwarded-For.
        try await Harness.run(.live, configure: { $0.rateLimits = Self.limits() }) { h in
            for i in 0..<2 {
                try await h.request(.post, "/v1/sessions", json: Self.signIn, headers: [.xForwardedFor: "203.0.113.\(i)"])
                    .expectProblem(.unauthorized, "invalid_credentials")
            }
            try await h.request(.post, "/v1/sessions", json: Self.signIn, headers: [.xForwardedFor: "203.0.113.99"])
                .expectProblem(.tooManyRequests, "rate_limited")
            let ip = h.services.lastRequest(IdentityAPI.signIn)?.client.ip
            #expect(ip == "127.0.0.1" || ip == "::1", "\(ip ?? "nil")")
        }
        // Trusted (loopback and 10/8): each forwarded client has its own budget; the rightmost
        // entry that is not a trusted proxy is the client, whatever the client put left of it.
        let proxies = try TrustedProxies(["127.0.0.1", "::1", "10.0.0.0/8"])
        try await Harness.run(.live, configure: { $0.rateLimits = Self.limits(); $0.trustedProxies = proxies }) { h in
            for _ in 0..<2 {
                try await h.request(.post, "/v1/sessions", json: Self.signIn, headers: [.xForwardedFor: "198.51.100.7, 203.0.113.1, 10.1.2.3"])
                    .expectProblem(.unauthorized, "invalid_credentials")
                #expect(h.services.lastRequest(IdentityAPI.signIn)?.client.ip == "203.0.113.1")
            }
            try await h.request(.post, "/v1/sessions", json: Self.signIn, headers: [.xForwardedFor: "6.6.6.6, 203.0.113.1"])
                .expectProblem(.tooManyRequests, "rate_limited")
            try await h.request(.post, "/v1/sessions", json: Self.signIn, headers: [.xForwardedFor: "203.0.113.2"])
                .expectProblem(.unauthorized, "invalid_credentials")
            // IPv6 clients, and an IPv4-mapped form of the same IPv4 client, through the proxy.
            try await h.request(.post, "/v1/sessions", json: Self.signIn, headers: [.xForwardedFor: "[2001:db8::1]:4711"])
                .expectProblem(.unauthorized, "invalid_credentials")
            #expect(h.services.lastRequest(IdentityAPI.signIn)?.client.ip == "2001:db8::1")
            try await h.request(.post, "/v1/sessions", json: Self.signIn, headers: [.xForwardedFor: "::ffff:203.0.113.1"])
                .expectProblem(.tooManyRequests, "rate_limited")
        }
    }

    @Test func anAccountThrottleFromTheIdentityServiceIs429WithItsRetryAfterAndCounted() async throws {
        try await Harness.run(.live, configure: { $0.rateLimits = .off }) { h in
            h.services.fail(IdentityAPI.signIn, with: RPCError(.tooManyAttempts, "service text", details: [RPCError.retryAfterKey: "17"]))
            let r = try await h.request(.post, "/v1/sessions", json: Self.signIn)
            let body = try r.expectProblem(.tooManyRequests, "too_many_attempts")
            #expect(r.headers[.retryAfter] == "17")
            #expect(body["detail"] as? String != "service text")
            let metrics = try await h.request(.get, "/metrics").text
            #expect(metrics.contains(#"gatehouse_http_throttled_requests_total{class="sign_in",reason="account"} 1"#))
        }
    }
}

/// The limiter and the address parsing on their own.
@Suite struct ClientAddressTests {
    @Test func addressesParseAndIPv4IsMapped() throws {
        #expect(IPAddress("192.0.2.1") == IPAddress("::ffff:192.0.2.1"))
        #expect(IPAddress("192.0.2.1")?.description == "192.0.2.1")
        #expect(IPAddress("2001:db8::1")?.description == "2001:db8::1")
        for bad in ["", "example.com", "1.2.3", "1.2.3.4:80", "[::1]", "::1%eth0", "1.2.3.4 ", String(repeating: "1", count: 100)] {
            #expect(IPAddress(bad) == nil, "\(bad)")
        }
    }

    @Test func rangesMatchByPrefix() throws {
        let proxies = try TrustedProxies(["10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "::1"])
        for inside in ["10.255.0.1", "192.0.2.7", "::ffff:10.0.0.1", "2001:db8:ffff::1", "::1"] {
            #expect(proxies.contains(IPAddress(inside)!), "\(inside)")
        }
        for outside in ["11.0.0.1", "192.0.2.8", "2001:db9::1", "::2", "::a00:1"] {
            #expect(!proxies.contains(IPAddress(outside)!), "\(outside)")
        }
        #expect(try TrustedProxies(["0.0.0.0/0"]).contains(IPAddress("8.8.8.8")!))
        #expect(try !TrustedProxies(["0.0.0.0/0"]).contains(IPAddress("2001:db8::1")!))
        for bad in ["10.0.0.0/33", "10.0.0.0/", "proxy.local", "::/129", "10.0.0.0/-1"] {
            #expect(throws: TrustedProxiesError.self, "\(bad)") { try TrustedProxies([bad]) }
        }
    }

    @Test func theClientIsTheRightmostUntrustedForwardedAddress() throws {
        let proxies = try TrustedProxies(["10.0.0.0/8"])
        #expect(proxies.client(peer: "203.0.113.5", forwardedFor: ["1.1.1.1"]).text == "203.0.113.5")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["1.1.1.1, 2.2.2.2", "10.0.0.2"]).text == "2.2.2.2")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["10.0.0.3, 10.0.0.2"]).text == "10.0.0.3")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: []).text == "10.0.0.1")
        // Garbage stops the walk at the last address known.
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["1.1.1.1, unknown, 10.0.0.9"]).text == "10.0.0.9")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["1.1.1.1:8080"]).text == "1.1.1.1")
        #expect(TrustedProxies.none.client(peer: "fe80::1%eth0", forwardedFor: []).address == IPAddress("fe80::1"))
    }

    @Test func rateLimitsParse() throws {
        #expect(try RateLimit.parse("60/min burst=20") == RateLimit(perSecond: 1, burst: 20))
        #expect(try RateLimit.parse("10/s") == RateLimit(perSecond: 10, burst: 10))
        #expect(try RateLimit.parse("3600/h, burst=5") == RateLimit(perSecond: 1, burst: 5))
        #expect(try RateLimit.parse("OFF") == nil)
        for bad in ["", "60", "60/day", "0/s", "-1/s", "5/s burst=0", "5/s burst", "5/s burst=x", "5/s 6/s 7/s"] {
            #expect(throws: RateLimitSyntaxError.self, "\(bad)") { try RateLimit.parse(bad) }
        }
    }

    @Test func bucketsAreBoundedAndARefilledBucketIsLikeNone() throws {
        let clock = ManualClock()
        let limiter = ClientRateLimiter(
            RateLimits(limits: [.signIn: RateLimit(perSecond: 1, burst: 2)], maxClients: 160), clock: clock.wallClock)
        let a = IPAddress("192.0.2.1")!
        #expect(limiter.admit(.signIn, a) == 0)
        #expect(limiter.admit(.signIn, a) == 0)
        #expect(limiter.admit(.signIn, a) == 1)
        #expect(limiter.admit(.refresh, a) == 0)  // not limited
        for i in 0..<5000 {
            _ = limiter.admit(.signIn, IPAddress(high: 0x2001_0db8_0000_0000 | UInt64(i) << 16, low: 1))
            #expect(limiter.count <= 160)
        }
        clock.advance(by: 2)
        #expect(limiter.admit(.signIn, a) == 0)
        // A wall clock stepped back refills nothing and does not freeze the bucket.
        clock.advance(by: -3600)
        #expect(limiter.admit(.signIn, a) == 0)
        #expect(limiter.admit(.signIn, a) == 1)
        clock.advance(by: 1)
        #expect(limiter.admit(.signIn, a) == 0)
    }

    @Test("an IPv6 client is its /64: every address in it shares one bucket and one connection cap")
    func ipv6ClientsAreTheirSlash64() throws {
        let clock = ManualClock()
        let limiter = ClientRateLimiter(RateLimits(limits: [.signIn: RateLimit(perSecond: 1, burst: 2)], maxClients: 160), clock: clock.wallClock)
        #expect(limiter.admit(.signIn, IPAddress("2001:db8:1:2::1")!) == 0)
        #expect(limiter.admit(.signIn, IPAddress("2001:db8:1:2:ffff::9")!) == 0)
        #expect(limiter.admit(.signIn, IPAddress("2001:db8:1:2::77")!) == 1)
        #expect(limiter.admit(.signIn, IPAddress("2001:db8:1:3::1")!) == 0)  // another /64
        #expect(limiter.admit(.signIn, IPAddress("192.0.2.1")!) == 0)
        #expect(limiter.admit(.signIn, IPAddress("192.0.2.2")!) == 0)  // IPv4: each address its own
        #expect(IPAddress.capKey("2001:db8:1:2::1") == IPAddress.capKey("2001:db8:1:2:ffff::9"))
        #expect(IPAddress.capKey("2001:db8:1:2::1") == "2001:db8:1:2::/64")
        #expect(IPAddress.capKey("192.0.2.1") == "192.0.2.1")
        #expect(IPAddress.capKey("::ffff:192.0.2.1") == "::ffff:192.0.2.1" || IPAddress.capKey("::ffff:192.0.2.1") == "192.0.2.1")
    }
}
