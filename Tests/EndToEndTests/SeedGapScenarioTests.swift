import Foundation
import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import GatehouseTestSupport
import RPCRouting
import Testing

/// Scenarios A9 and A27 of SEEDS.md over HTTP against three separate processes.
@Suite("Seed scenarios: password strength (A9), a provider-only user sets a password (A27)")
struct SeedGapScenarioTests {
    @Test("A9: the strength answer carries a three-step level: password and Password1 weak, a long uncommon passphrase strong")
    func strengthLevel() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        func level(_ password: String) async throws -> (String?, Int?) {
            let answer = try await stack.request("POST", "/v1/password-strength", json: ["password": password])
            #expect(answer.status == 200)
            return (answer.json["level"] as? String, answer.json["score"] as? Int)
        }
        #expect(try await level("password").0 == "weak")
        #expect(try await level("Password1").0 == "weak")
        #expect(try await level("coffee-table").0 == "medium")
        let strong = try await level("quixotic pelican marmalade zeppelin fjord")
        #expect(strong.0 == "strong" && strong.1 == 4)
    }

    @Test("A27: a Google-only user sets a password after a recent login: providers [google.com, password], and email sign-in works")
    func providerOnlyUserSetsAPassword() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        // The user as a Google sign-in leaves it (issue 20 brings that route): an email, a linked
        // google.com identity, no password; its session issued by the real token service, as the
        // identity service does after a provider sign-in.
        let id = try await CoreScenarioTests.seedProviderOnlyUser(in: stack, email: "gail@example.com")
        try await stack.startThreeRoles()
        let tokens = try await Self.issueSession(stack, userID: id, email: "gail@example.com", amr: ["google"])
        let me = try await stack.request("GET", "/v1/me", bearer: tokens.accessToken)
        #expect(me.status == 200 && me.json["providers"] as? [String] == ["google.com"])
        // No password yet: email sign-in fails like any wrong password.
        let before = try await stack.request("POST", "/v1/sessions", json: ["email": "gail@example.com", "password": "glacier lantern marmalade"])
        #expect(before.status == 401 && before.json["code"] as? String == "invalid_credentials")

        let set = try await stack.request("PUT", "/v1/me/password", json: ["password": "glacier lantern marmalade"], bearer: tokens.accessToken)
        #expect(set.status == 200, "\(String(decoding: set.body, as: UTF8.self))")
        #expect(set.json["providers"] as? [String] == ["google.com", "password"])
        let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": "gail@example.com", "password": "glacier lantern marmalade"])
        #expect(signIn.status == 200)
        #expect((signIn.json["user"] as? [String: Any])?["id"] as? String == id)
        // The session that set it continues.
        #expect(try await stack.request("GET", "/v1/me", bearer: tokens.accessToken).status == 200)

        // Past the recent-login window the same change needs a re-authentication.
        stack.advanceClock(by: .seconds(301))
        let fresh = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": tokens.refreshToken])
        let access = ((fresh.json["session"] as? [String: Any])?["accessToken"] as? String) ?? ""
        let late = try await stack.request("PUT", "/v1/me/password", json: ["password": "another long passphrase"], bearer: access)
        #expect(late.status == 403 && late.json["code"] as? String == "requires_recent_login")
    }

    /// A session for `userID` from the stack's token service over ZeroMQ (`token.issueSession`,
    /// as the identity service calls it after verifying a sign-in).
    static func issueSession(_ stack: Stack, userID: String, email: String, amr: [String]) async throws -> SessionTokens {
        let client = try RPCClient(configuration: .init(endpoint: stack.environment["GATEHOUSE_TOKEN_URL"] ?? "", defaultTimeout: .seconds(5)))
        defer { Task { await client.close() } }
        let claims = UserClaims(exists: true, disabled: false, email: email, emailVerified: true, isAnonymous: false, customClaimsJSON: "")
        return try await client.call(
            ServiceContracts.issueSession,
            IssueSessionRequest(userID: userID, claims: claims, amr: amr, authTime: stack.clock.clock.now, client: ClientInfo()))
    }
}
