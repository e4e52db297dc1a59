import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import Testing

/// Scenarios A1–A3, A5, A6 and A31 of SEEDS.md (seeds 000, 001, 003), each over HTTP against three
/// separate processes whose clock the test moves (`Stack.advanceClock`).
@Suite("Seed scenarios: core (A1–A3, A5, A6, A31)")
struct CoreScenarioTests {
    static let password = "correct horse battery"

    static func session(_ response: Stack.Response) -> (access: String, refresh: String) {
        let session = response.json["session"] as? [String: Any]
        return (session?["accessToken"] as? String ?? "", session?["refreshToken"] as? String ?? "")
    }

    @Test("A1: sign-up → sign-in (same id) → sign-out refuses the refresh token and the access token at once")
    func signUpSignInSignOut() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let signUp = try await stack.request("POST", "/v1/accounts", json: ["email": "ada@example.com", "password": Self.password])
        #expect(signUp.status == 201)
        let user = try #require(signUp.json["user"] as? [String: Any])
        let id = try #require(user["id"] as? String)
        #expect(user["email"] as? String == "ada@example.com")
        let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": "ada@example.com", "password": Self.password])
        #expect(signIn.status == 200)
        #expect((signIn.json["user"] as? [String: Any])?["id"] as? String == id)
        let (access, refresh) = Self.session(signIn)
        #expect(try await stack.request("GET", "/v1/me", bearer: access).status == 200)
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: access).status == 204)
        // At once: no waiting for an event.
        let refused = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": refresh])
        #expect(refused.status == 401)
        let me = try await stack.request("GET", "/v1/me", bearer: access)
        #expect(me.status == 401 && me.json["code"] as? String == "session_revoked")
    }

    @Test("A2: sign-up errors carry a code and a message, and create nothing")
    func signUpErrors() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        #expect(try await stack.request("POST", "/v1/accounts", json: ["email": "bo@example.com", "password": Self.password]).status == 201)
        let taken = try await stack.request("POST", "/v1/accounts", json: ["email": "BO@example.com", "password": "another long password"])
        #expect(taken.status == 409 && taken.json["code"] as? String == "email_exists")
        #expect(!(taken.json["detail"] as? String ?? "").isEmpty)
        let weak = try await stack.request("POST", "/v1/accounts", json: ["email": "weak@example.com", "password": "abc"])
        #expect(weak.status == 422 && weak.json["code"] as? String == "weak_password")
        #expect(weak.json["reasons"] as? [String] == ["too_short"])
        let invalid = try await stack.request("POST", "/v1/accounts", json: ["email": "not-an-email", "password": Self.password])
        #expect(invalid.status == 422 && invalid.json["code"] as? String == "invalid_email")
        #expect(!(invalid.json["detail"] as? String ?? "").isEmpty)
        // Nothing was created: the taken email keeps its first password, the refused email is free.
        let first = try await stack.request("POST", "/v1/sessions", json: ["email": "bo@example.com", "password": Self.password])
        #expect(first.status == 200)
        let second = try await stack.request("POST", "/v1/sessions", json: ["email": "bo@example.com", "password": "another long password"])
        #expect(second.status == 401)
        #expect(try await stack.request("POST", "/v1/accounts", json: ["email": "weak@example.com", "password": Self.password]).status == 201)
    }

    @Test("A3: a wrong password, an unknown email and a provider-only account answer alike, each after one hash")
    func signInErrorsAreIndistinguishable() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        // A provider-only user (no password), written into the identity database before it starts.
        _ = try await Self.seedProviderOnlyUser(in: stack, email: "gina@example.com")
        try await stack.startThreeRoles()
        #expect(try await stack.request("POST", "/v1/accounts", json: ["email": "cy@example.com", "password": Self.password]).status == 201)
        var answers: [Stack.Response] = []
        for email in ["cy@example.com", "nobody@example.com", "gina@example.com"] {
            let before = try await Self.hashesCompleted(stack)
            answers.append(try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": "wrong password here"]))
            // The same work for each: one password hash (a dummy one when there is nothing to compare).
            #expect(try await Self.hashesCompleted(stack) == before + 1, "\(email)")
        }
        for answer in answers {
            #expect(answer.status == 401)
            #expect(answer.json["code"] as? String == "invalid_credentials")
            #expect(answer.body == answers[0].body)
            #expect(answer.headers["www-authenticate"] == answers[0].headers["www-authenticate"])
        }
    }

    @Test("GATEHOUSE_ACCESS_TOKEN_LEEWAY (0 and 45 s): GET /v1/me accepts an access token until exp plus the leeway and refuses it after", arguments: [0, 45])
    func accessTokenLeeway(leeway: Int) async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let setting = ["GATEHOUSE_ACCESS_TOKEN_LEEWAY": "\(leeway)"]
        for role in ["identity", "token", "gateway"] { try stack.start(role, environment: setting) }
        try await stack.waitReady()
        let signUp = try await stack.request("POST", "/v1/accounts", json: ["email": "lee@example.com", "password": Self.password])
        let (access, _) = Self.session(signUp)
        // The stack's clock is real time plus the offset moved here, so real time only adds:
        // 5 s before the end of the leeway is still inside it unless the calls took 5 s.
        stack.advanceClock(by: .seconds(900 + leeway - 5))
        #expect(try await stack.request("GET", "/v1/me", bearer: access).status == 200)
        stack.advanceClock(by: .seconds(6))
        let expired = try await stack.request("GET", "/v1/me", bearer: access)
        #expect(expired.status == 401 && expired.json["code"] as? String == "token_expired")
    }

    @Test("A5: past the access TTL /me answers 401; a refresh gives a new access token; no refresh token is 400, a garbage one 401")
    func accessExpiryAndRefresh() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let signUp = try await stack.request("POST", "/v1/accounts", json: ["email": "dee@example.com", "password": Self.password])
        let (access, refresh) = Self.session(signUp)
        #expect(try await stack.request("GET", "/v1/me", bearer: access).status == 200)
        // 900 s of access TTL and 10 s of leeway: 16 minutes later the token has expired.
        stack.advanceClock(by: .seconds(16 * 60))
        let expired = try await stack.request("GET", "/v1/me", bearer: access)
        #expect(expired.status == 401 && expired.json["code"] as? String == "token_expired")
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": refresh])
        #expect(refreshed.status == 200)
        let (newAccess, _) = Self.session(refreshed)
        #expect(newAccess != access)
        #expect(try await stack.request("GET", "/v1/me", bearer: newAccess).status == 200)
        let missing = try await stack.request("POST", "/v1/sessions/refresh", json: [String: String]())
        #expect(missing.status == 400)
        let garbage = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": "garbage"])
        #expect(garbage.status == 401 && garbage.json["code"] as? String == "invalid_refresh_token")
    }

    @Test("A6: deleted out of band (gatehouse users delete), the user's unexpired access token and its refresh token answer 401")
    func meAfterDeletion() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let user = try await signUpUser(stack, "fay@example.com", password: Self.password)
        #expect(try await stack.request("GET", "/v1/me", bearer: user.access).status == 200)
        let deleted = try await runUsersCommand(stack, ["delete", user.id])
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.stdout == "user \(user.id) deleted; its sessions are revoked\n")
        // The refresh token at once (the revocation is committed before the command returns).
        let refresh = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": user.refresh])
        #expect(refresh.status == 401)
        // The access token, still unexpired, once the revocation feed reaches the gateway.
        try await waitUntil("the deleted user's access token refused", timeout: .seconds(5), interval: .milliseconds(20)) {
            try await stack.request("GET", "/v1/me", bearer: user.access).status == 401
        }
        // The email is free again; deleting twice is a clear error, not a crash.
        #expect(try await stack.request("POST", "/v1/accounts", json: ["email": "fay@example.com", "password": Self.password]).status == 201)
        let again = try await runUsersCommand(stack, ["delete", user.id])
        #expect(again.status == 1 && again.stderr.contains("(user_not_found)"))
    }

    @Test("A31: signing out twice with the same token never answers 5xx")
    func signOutTwice() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let signUp = try await stack.request("POST", "/v1/accounts", json: ["email": "eve@example.com", "password": Self.password])
        let (access, _) = Self.session(signUp)
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: access).status == 204)
        let again = try await stack.request("DELETE", "/v1/sessions/current", bearer: access)
        #expect(again.status < 500)
        #expect(again.status == 401 && again.json["code"] as? String == "session_revoked")
        let everywhere = try await stack.request("DELETE", "/v1/sessions", bearer: access)
        #expect(everywhere.status == 401)
    }

    // MARK: Helpers

    /// Writes a user with an email, no password and a linked `google.com` identity into the
    /// stack's identity database (a real SQLite file) before the identity role opens it.
    static func seedProviderOnlyUser(in stack: Stack, email: String, subject: String = "google-sub-1") async throws -> String {
        try FileManager.default.createDirectory(at: stack.dataDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let store = try await SQLiteUserStore.open(path: stack.dataDir.appendingPathComponent("identity.sqlite").path)
        try await store.migrate()
        let user = UserRecord(id: .random(), email: try EmailAddress(email), emailVerified: true, createdAt: Date())
        try await store.insert(user)
        try await store.linkIdentity(provider: "google.com", subject: subject, to: user.id, at: Date())
        return user.id.rawValue
    }

    /// The identity service's completed hash jobs, as `/metrics` reports them.
    static func hashesCompleted(_ stack: Stack) async throws -> Int {
        let text = String(decoding: try await stack.request("GET", "/metrics").body, as: UTF8.self)
        let line = text.split(separator: "\n").first { $0.hasPrefix("gatehouse_identity_hash_pool_completed_jobs ") }
        return line.flatMap { Double($0.split(separator: " ").last ?? "") }.map { Int($0) } ?? -1
    }
}
