import Foundation
import GatehouseTestSupport
import Testing

/// Seed 002's anonymous-first flows over HTTP against three processes: upgrade in place (A15),
/// an unknown email while anonymous (A23), migration with confirmation and resume (A17–A19), a
/// failed migration that keeps the anonymous user (A20), and two concurrent resumes.
@Suite("Upgrade and migration over three processes")
struct MigrationEndToEndTests {
    static let password = "correct horse battery"

    struct Anonymous {
        let id: String
        let access: String
        let refresh: String
    }

    func anonymous(_ stack: Stack) async throws -> Anonymous {
        let created = try await stack.request("POST", "/v1/accounts/anonymous")
        #expect(created.status == 201)
        let session = try #require(created.json["session"] as? [String: Any])
        return Anonymous(
            id: try #require((created.json["user"] as? [String: Any])?["id"] as? String),
            access: try #require(session["accessToken"] as? String), refresh: try #require(session["refreshToken"] as? String))
    }

    /// Signs up `email`; returns its user id.
    func signUp(_ stack: Stack, _ email: String) async throws -> String {
        let r = try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": Self.password])
        #expect(r.status == 201)
        return try #require((r.json["user"] as? [String: Any])?["id"] as? String)
    }

    func refresh(_ stack: Stack, _ token: String) async throws -> Stack.Response {
        try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": token])
    }

    @Test("A23 then A15: an unknown email while anonymous answers user_not_found; the app registers and A is upgraded in place, its refresh chain still valid")
    func unknownEmailThenUpgrade() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let a = try await anonymous(stack)
        let unknown = try await stack.request(
            "POST", "/v1/sessions", json: ["email": "ann@example.com", "password": Self.password], bearer: a.access)
        #expect(unknown.status == 404)
        #expect(unknown.json["code"] as? String == "user_not_found")

        let upgraded = try await stack.request(
            "POST", "/v1/me/upgrade", json: ["email": "ann@example.com", "password": Self.password], bearer: a.access)
        #expect(upgraded.status == 200)
        let user = try #require(upgraded.json["user"] as? [String: Any])
        #expect(user["id"] as? String == a.id)
        #expect(user["isAnonymous"] as? Bool == false)
        #expect(user["providers"] as? [String] == ["password"])
        let access = try #require((upgraded.json["session"] as? [String: Any])?["accessToken"] as? String)
        #expect(jwtClaims(access)["sub"] as? String == a.id)
        #expect(jwtClaims(access)["amr"] as? [String] == ["pwd"])
        #expect(jwtClaims(access)["is_anonymous"] as? Bool != true)
        let me = try await stack.request("GET", "/v1/me", bearer: access)
        #expect(me.json["isAnonymous"] as? Bool == false && me.json["email"] as? String == "ann@example.com")
        // A's anonymous refresh chain stays valid and now mints tokens of the upgraded user.
        let refreshed = try await refresh(stack, a.refresh)
        #expect(refreshed.status == 200)
        let next = try #require((refreshed.json["session"] as? [String: Any])?["accessToken"] as? String)
        #expect(jwtClaims(next)["sub"] as? String == a.id)
        #expect(jwtClaims(next)["is_anonymous"] as? Bool != true)
        #expect(jwtClaims(next)["email"] as? String == "ann@example.com")
        // The registered email signs in to A; registering it again is email_exists.
        let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": "ann@example.com", "password": Self.password])
        #expect((signIn.json["user"] as? [String: Any])?["id"] as? String == a.id)
        let again = try await stack.request("POST", "/v1/accounts", json: ["email": "ann@example.com", "password": Self.password])
        #expect(again.status == 409 && again.json["code"] as? String == "email_exists")
    }

    @Test("A20, A17, A18: a wrong password keeps A; migration_required keeps A; resume with allowMigration true deletes A and signs in to B")
    func failedMigrationThenConfirmation() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let b = try await signUp(stack, "bea@example.com")
        let a = try await anonymous(stack)

        // A20: a wrong password, even with the decision given, changes nothing.
        let wrong = try await stack.request(
            "POST", "/v1/sessions", json: ["email": "bea@example.com", "password": "wrong password!", "allowMigration": true], bearer: a.access)
        #expect(wrong.status == 401)
        #expect(wrong.json["code"] as? String == "invalid_credentials")
        #expect(try await stack.request("GET", "/v1/me", bearer: a.access).json["id"] as? String == a.id)
        let aRefreshed = try await refresh(stack, a.refresh)
        #expect(aRefreshed.status == 200)
        let aRefresh = try #require((aRefreshed.json["session"] as? [String: Any])?["refreshToken"] as? String)
        let aAccess = try #require((aRefreshed.json["session"] as? [String: Any])?["accessToken"] as? String)

        // A17: no decision: migration_required, A untouched.
        let required = try await stack.request("POST", "/v1/sessions", json: ["email": "bea@example.com", "password": Self.password], bearer: aAccess)
        #expect(required.status == 409)
        #expect(required.json["code"] as? String == "migration_required")
        #expect(required.json["anonymousUserId"] as? String == a.id)
        #expect(required.json["existingUserId"] as? String == b)
        #expect(required.json["resumeHandleExpiresIn"] as? Int == 300)
        let handle = try #require(required.json["resumeHandle"] as? String)
        #expect(try await stack.request("GET", "/v1/me", bearer: aAccess).status == 200)

        // A18: resume with the decision, from the same session.
        let resumed = try await stack.request(
            "POST", "/v1/sessions/resume", json: ["resumeHandle": handle, "allowMigration": true], bearer: aAccess)
        #expect(resumed.status == 200)
        #expect((resumed.json["user"] as? [String: Any])?["id"] as? String == b)
        let migration = try #require(resumed.json["migration"] as? [String: Any])
        #expect(migration["oldUserId"] as? String == a.id)
        #expect(migration["newUserId"] as? String == b)
        #expect(migration["performMigration"] as? Bool == true)
        let bAccess = try #require((resumed.json["session"] as? [String: Any])?["accessToken"] as? String)
        #expect(jwtClaims(bAccess)["sub"] as? String == b)
        #expect(try await stack.request("GET", "/v1/me", bearer: bAccess).json["id"] as? String == b)
        // A is gone: its access tokens are refused at once, its refresh tokens too.
        #expect(try await stack.request("GET", "/v1/me", bearer: aAccess).status == 401)
        #expect(try await stack.request("GET", "/v1/me", bearer: a.access).status == 401)
        #expect(try await refresh(stack, aRefresh).status == 401)
        // B is untouched: its password still signs in.
        let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": "bea@example.com", "password": Self.password])
        #expect((signIn.json["user"] as? [String: Any])?["id"] as? String == b)
    }

    @Test("a resume handle lasts GATEHOUSE_MIGRATION_RESUME_TTL on the identity's clock, and only for the session that got it")
    func resumeHandleTTL() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        for role in ["identity", "token", "gateway"] { try stack.start(role, environment: ["GATEHOUSE_MIGRATION_RESUME_TTL": "30"]) }
        try await stack.waitReady()
        _ = try await signUp(stack, "bea@example.com")
        let a = try await anonymous(stack)
        let signIn: [String: Any] = ["email": "bea@example.com", "password": Self.password]
        let first = try await stack.request("POST", "/v1/sessions", json: signIn, bearer: a.access)
        #expect(first.status == 409)
        #expect(first.json["resumeHandleExpiresIn"] as? Int == 30)
        let expired = try #require(first.json["resumeHandle"] as? String)
        stack.advanceClock(by: .seconds(31))
        let late = try await stack.request("POST", "/v1/sessions/resume", json: ["resumeHandle": expired, "allowMigration": true], bearer: a.access)
        #expect(late.status == 400 && late.json["code"] as? String == "invalid_resume_handle")
        #expect(try await stack.request("GET", "/v1/me", bearer: a.access).json["id"] as? String == a.id)

        let second = try await stack.request("POST", "/v1/sessions", json: signIn, bearer: a.access)
        let handle = try #require(second.json["resumeHandle"] as? String)
        // Another anonymous session cannot use it, and leaves it to its owner.
        let other = try await anonymous(stack)
        let stolen = try await stack.request("POST", "/v1/sessions/resume", json: ["resumeHandle": handle, "allowMigration": true], bearer: other.access)
        #expect(stolen.status == 400 && stolen.json["code"] as? String == "invalid_resume_handle")
        stack.advanceClock(by: .seconds(20))
        let resumed = try await stack.request("POST", "/v1/sessions/resume", json: ["resumeHandle": handle, "allowMigration": true], bearer: a.access)
        #expect(resumed.status == 200)
        #expect((resumed.json["migration"] as? [String: Any])?["oldUserId"] as? String == a.id)
    }

    @Test("A19 with two concurrent resumes of one handle (allowMigration false): exactly one succeeds, A is deleted, performMigration false")
    func concurrentResumes() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let b = try await signUp(stack, "bea@example.com")
        let a = try await anonymous(stack)
        let required = try await stack.request("POST", "/v1/sessions", json: ["email": "bea@example.com", "password": Self.password], bearer: a.access)
        #expect(required.status == 409)
        let handle = try #require(required.json["resumeHandle"] as? String)
        let responses = try await withThrowingTaskGroup(of: Stack.Response.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    try await stack.request("POST", "/v1/sessions/resume", json: ["resumeHandle": handle, "allowMigration": false], bearer: a.access)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let succeeded = responses.filter { $0.status == 200 }
        #expect(succeeded.count == 1)
        let migration = try #require(succeeded.first?.json["migration"] as? [String: Any])
        #expect(migration["performMigration"] as? Bool == false)
        #expect(migration["oldUserId"] as? String == a.id && migration["newUserId"] as? String == b)
        // The other one lost the handle, or (arriving after the answer) the session that held it.
        let loser = try #require(responses.first { $0.status != 200 })
        #expect(
            (loser.status == 400 && loser.json["code"] as? String == "invalid_resume_handle") || loser.status == 401,
            "\(loser.status) \(String(decoding: loser.body, as: UTF8.self))")
        #expect(try await stack.request("GET", "/v1/me", bearer: a.access).status == 401)
        #expect(try await refresh(stack, a.refresh).status == 401)
    }
}
