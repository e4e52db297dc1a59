import Foundation
import GatehouseTestSupport
import Testing

/// Re-authentication, password and email changes and self-deletion over HTTP against the three
/// roles as separate processes (scenarios A24, A29, A31; A27 is in the gateway tests, which
/// can make a provider-only user through the store; A28 is in EmailChangeEndToEndTests).
@Suite("Account changes and deletion over three processes")
struct AccountEndToEndTests {
    static let pw = "correct horse battery"
    static let newPW = "saffron kettle obelisk"

    func session(_ response: Stack.Response) -> (access: String, refresh: String) {
        let session = response.json["session"] as? [String: Any] ?? [:]
        return (session["accessToken"] as? String ?? "", session["refreshToken"] as? String ?? "")
    }

    func signUp(_ stack: Stack, _ email: String, _ password: String = pw) async throws -> (access: String, refresh: String) {
        let r = try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": password])
        #expect(r.status == 201)
        return session(r)
    }

    func signIn(_ stack: Stack, _ email: String, _ password: String = pw) async throws -> Stack.Response {
        try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": password])
    }

    func refreshStatus(_ stack: Stack, _ token: String) async throws -> Int {
        try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": token]).status
    }

    @Test("A24: past the window a password change is requires_recent_login, another user's credentials user_mismatch; re-authenticated, the password change succeeds, the old password fails, the other sessions are revoked")
    func recentLoginGate() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let first = try await signUp(stack, "u@example.com")
        _ = try await signUp(stack, "v@example.com", Self.newPW)
        let other = session(try await signIn(stack, "u@example.com"))
        // Past the recent-login window (300 s), within the access tokens' lifetime (900 s).
        stack.advanceClock(by: .seconds(301))

        let stale = try await stack.request("PUT", "/v1/me/password", json: ["password": Self.newPW], bearer: first.access)
        #expect(stale.status == 403 && stale.json["code"] as? String == "requires_recent_login")
        #expect(stale.json["maxAgeSeconds"] as? Int == 300)
        let mismatch = try await stack.request(
            "POST", "/v1/me/reauthenticate", json: ["email": "v@example.com", "password": Self.newPW], bearer: first.access)
        #expect(mismatch.status == 403 && mismatch.json["code"] as? String == "user_mismatch")
        #expect(try await stack.request("GET", "/v1/me", bearer: first.access).status == 200)

        let reauth = try await stack.request("POST", "/v1/me/reauthenticate", json: ["password": Self.pw], bearer: first.access)
        #expect(reauth.status == 200)
        let current = session(reauth)
        #expect(jwtClaims(current.access)["amr"] as? [String] == ["pwd"])
        let authTime = jwtClaims(current.access)["auth_time"] as? Double ?? 0
        #expect(authTime > (jwtClaims(first.access)["auth_time"] as? Double ?? 0) + 300)
        // The presented session is replaced: refused at once.
        #expect(try await stack.request("GET", "/v1/me", bearer: first.access).status == 401)
        #expect(try await refreshStatus(stack, first.refresh) == 401)
        let changed = try await stack.request("PUT", "/v1/me/password", json: ["password": Self.newPW], bearer: current.access)
        #expect(changed.status == 200)
        #expect(changed.json["providers"] as? [String] == ["password"])
        #expect(try await signIn(stack, "u@example.com").status == 401)
        #expect(try await signIn(stack, "u@example.com", Self.newPW).status == 200)
        // The other session is revoked (access and refresh), the current one continues.
        #expect(try await stack.request("GET", "/v1/me", bearer: other.access).status == 401)
        #expect(try await refreshStatus(stack, other.refresh) == 401)
        #expect(try await stack.request("GET", "/v1/me", bearer: current.access).status == 200)
        #expect(try await refreshStatus(stack, current.refresh) == 200)
    }

    @Test("GATEHOUSE_RECENT_LOGIN_WINDOW=0: every gated change is refused, even right after re-authenticating; an anonymous user can still delete itself")
    func windowZero() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: ["GATEHOUSE_RECENT_LOGIN_WINDOW": "0"])
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        let first = try await signUp(stack, "zero@example.com")
        let reauth = try await stack.request("POST", "/v1/me/reauthenticate", json: ["password": Self.pw], bearer: first.access)
        #expect(reauth.status == 200)
        let refused = try await stack.request("DELETE", "/v1/me", bearer: session(reauth).access)
        #expect(refused.status == 403 && refused.json["maxAgeSeconds"] as? Int == 0)
        let anonymous = session(try await stack.request("POST", "/v1/accounts/anonymous"))
        #expect(try await stack.request("DELETE", "/v1/me", bearer: anonymous.access).status == 204)
    }

    @Test("A29: deletion refuses every token of the user at once and frees the email; with continueAnonymously the answer is a fresh anonymous session")
    func deleteAccount() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let first = try await signUp(stack, "d@example.com")
        let second = session(try await signIn(stack, "d@example.com"))
        let deleted = try await stack.request("DELETE", "/v1/me", bearer: first.access)
        #expect(deleted.status == 204)
        for token in [first.access, second.access] {
            #expect(try await stack.request("GET", "/v1/me", bearer: token).status == 401)
        }
        for token in [first.refresh, second.refresh] { #expect(try await refreshStatus(stack, token) == 401) }
        #expect(try await signIn(stack, "d@example.com").status == 401)
        let again = try await signUp(stack, "d@example.com")

        let continued = try await stack.request("DELETE", "/v1/me?continueAnonymously=true", bearer: again.access)
        #expect(continued.status == 201)
        let user = continued.json["user"] as? [String: Any] ?? [:]
        #expect(user["isAnonymous"] as? Bool == true)
        let anonymous = session(continued)
        #expect(jwtClaims(anonymous.access)["is_anonymous"] as? Bool == true)
        #expect(try await stack.request("GET", "/v1/me", bearer: anonymous.access).json["id"] as? String == user["id"] as? String)
        #expect(try await stack.request("GET", "/v1/me", bearer: again.access).status == 401)
        #expect(try await refreshStatus(stack, anonymous.refresh) == 200)
    }

    @Test("A31: signing out twice, or deleting twice, never answers 5xx; the second call is 401")
    func twice() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let me = try await signUp(stack, "t@example.com")
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: me.access).status == 204)
        let second = try await stack.request("DELETE", "/v1/sessions/current", bearer: me.access)
        #expect(second.status == 401)
        let again = session(try await signIn(stack, "t@example.com"))
        #expect(try await stack.request("DELETE", "/v1/me", bearer: again.access).status == 204)
        let deletedTwice = try await stack.request("DELETE", "/v1/me", bearer: again.access)
        #expect(deletedTwice.status == 401)
        #expect(try await stack.request("DELETE", "/v1/sessions", bearer: again.access).status == 401)
    }
}
