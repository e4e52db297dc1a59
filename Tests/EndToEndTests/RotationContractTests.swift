import Foundation
import GatehouseTestSupport
import Testing

/// Scenario A7 (seed 001's client keeps its first refresh token): Gatehouse rotates refresh
/// tokens and refuses a superseded one presented after the grace window as reuse, revoking the
/// whole session (docs/app/accounts-and-sessions.md, "Refresh tokens: rotation and reuse"). Three processes over HTTP.
@Suite("Refresh-token rotation contract (A7) over three processes")
struct RotationContractTests {
    /// Signs up a new user; its access and refresh tokens.
    static func signUp(_ stack: Stack) async throws -> (access: String, refresh: String) {
        let created = try await stack.request(
            "POST", "/v1/accounts", json: ["email": "echolog-\(UUID().uuidString.prefix(8))@example.com", "password": "correct horse battery staple"])
        #expect(created.status == 201)
        let session = try #require(created.json["session"] as? [String: Any])
        return (try #require(session["accessToken"] as? String), try #require(session["refreshToken"] as? String))
    }

    /// `POST /v1/sessions/refresh` with `token`.
    static func refresh(_ stack: Stack, _ token: String) async throws -> Stack.Response {
        try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": token])
    }

    @Test("A7: a client that keeps its first refresh token is signed out at its second refresh: reuse revokes the session")
    func firstTokenAgainIsReuse() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        // The default grace window (GATEHOUSE_REFRESH_GRACE, 10 s); the test moves the clock past it.
        try await stack.startThreeRoles()
        let (access0, rt0) = try await Self.signUp(stack)

        // Seed 001's client refreshes when its access token has expired (15 minutes).
        stack.advanceClock(by: .seconds(16 * 60))
        #expect(try await stack.request("GET", "/v1/me", bearer: access0).json["code"] as? String == "token_expired")
        // First refresh: RT0 → RT1. The client reads only the access token and keeps RT0.
        let first = try await Self.refresh(stack, rt0)
        #expect(first.status == 200)
        let session1 = try #require(first.json["session"] as? [String: Any])
        let access1 = try #require(session1["accessToken"] as? String)
        let rt1 = try #require(session1["refreshToken"] as? String)
        #expect(rt1 != rt0)
        #expect(try await stack.request("GET", "/v1/me", bearer: access1).status == 200)

        // Past the grace window (access1 still valid), the client presents RT0 again: reuse.
        stack.advanceClock(by: .seconds(11))
        let second = try await Self.refresh(stack, rt0)
        #expect(second.status == 401)
        #expect(second.json["code"] as? String == "refresh_token_reused")
        #expect(second.headers["www-authenticate"] != nil)
        // The whole session is revoked: its successor refresh token, and its access token at once.
        let withRT1 = try await Self.refresh(stack, rt1)
        #expect(withRT1.status == 401)
        #expect(withRT1.json["code"] as? String == "session_revoked")
        let me = try await stack.request("GET", "/v1/me", bearer: access1)
        #expect(me.status == 401)
        #expect(me.json["code"] as? String == "session_revoked")
    }

    @Test("within the grace window the superseded token is a retry: the same successor, the session intact")
    func retryWithinGrace() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        // The default grace window, 10 s: the retry comes well inside it.
        try await stack.startThreeRoles()
        let (_, rt0) = try await Self.signUp(stack)
        let first = try await Self.refresh(stack, rt0)
        let retry = try await Self.refresh(stack, rt0)
        #expect(first.status == 200 && retry.status == 200)
        let rt1 = (first.json["session"] as? [String: Any])?["refreshToken"] as? String
        #expect(rt1 != nil && (retry.json["session"] as? [String: Any])?["refreshToken"] as? String == rt1)
        // The client that stores each new token goes on refreshing.
        let next = try await Self.refresh(stack, rt1 ?? "")
        #expect(next.status == 200)
        let access = (next.json["session"] as? [String: Any])?["accessToken"] as? String ?? ""
        #expect(try await stack.request("GET", "/v1/me", bearer: access).status == 200)
    }
}
