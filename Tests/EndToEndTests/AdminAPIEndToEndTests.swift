import Foundation
import GatehouseTestSupport
import Testing

/// The admin listener (issue 22 §1, §2) against three processes: keys and scopes, the user
/// operations over HTTP and through `gatehouse users`, and its audit trail.
@Suite("Admin API against three processes")
struct AdminAPIEndToEndTests {
    let password = "glacier lantern marmalade"

    /// One request to the stack's admin listener with `key`.
    func admin(_ stack: Stack, _ method: String, _ path: String, key: String?, json: Any? = nil) async throws -> Stack.Response {
        try await stack.request(method, path, json: json, headers: key.map { ["Authorization": "Bearer \($0)"] } ?? [:], port: stack.adminPort)
    }

    /// A key of `scope`, made with `gatehouse admin keys create`.
    func makeKey(_ stack: Stack, _ name: String, _ scope: String) async throws -> String {
        let made = try await runProcess(
            try gatehouseBinary(), ["admin", "keys", "create", "--name", name, "--scope", scope], environment: stack.environment)
        try #require(made.status == 0, "\(made.stderr)")
        return String(made.stdout.split(separator: "\n").first ?? "")
    }

    @Test("keys: no key or a wrong one is 401 invalid_admin_key; a key without the scope is 403 insufficient_scope; a revoked key is refused at once; the admin paths are not on the public port")
    func keysAndScopes() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        _ = try await signUpUser(stack, "someone@example.com")
        let reader = try await makeKey(stack, "reader", "users:read")

        let none = try await admin(stack, "GET", "/admin/v1/users", key: nil)
        #expect(none.status == 401 && none.json["code"] as? String == "invalid_admin_key")
        #expect(none.headers.first { $0.key.lowercased() == "content-type" }?.value.hasPrefix("application/problem+json") == true)
        let wrong = try await admin(stack, "GET", "/admin/v1/users", key: String(reader.dropLast()) + (reader.hasSuffix("A") ? "B" : "A"))
        #expect(wrong.status == 401 && wrong.json["code"] as? String == "invalid_admin_key")
        let garbage = try await admin(stack, "GET", "/admin/v1/users", key: "not-a-key")
        #expect(garbage.status == 401)

        let listed = try await admin(stack, "GET", "/admin/v1/users", key: reader)
        #expect(listed.status == 200, "\(String(decoding: listed.body, as: UTF8.self))")
        #expect((listed.json["users"] as? [[String: Any]])?.count == 1)
        let create = try await admin(stack, "POST", "/admin/v1/users", key: reader, json: ["email": "new@example.com"])
        #expect(create.status == 403 && create.json["code"] as? String == "insufficient_scope")
        #expect((create.json["detail"] as? String)?.contains("users:write") == true)
        let audit = try await admin(stack, "GET", "/admin/v1/audit", key: reader)
        #expect(audit.status == 403)

        // Listed without secrets; revoked: refused at the very next request.
        let keys = try await runProcess(try gatehouseBinary(), ["admin", "keys", "list", "--json"], environment: stack.environment)
        #expect(keys.status == 0 && !keys.stdout.contains(reader.split(separator: ".").last.map(String.init) ?? "x"))
        let id = String(reader.dropFirst(4).prefix(16))
        #expect(keys.stdout.contains(id))
        let revoke = try await runProcess(try gatehouseBinary(), ["admin", "keys", "revoke", id], environment: stack.environment)
        #expect(revoke.status == 0, "\(revoke.stderr)")
        let after = try await admin(stack, "GET", "/admin/v1/users", key: reader)
        #expect(after.status == 401 && after.json["code"] as? String == "invalid_admin_key")
        let unknown = try await runProcess(try gatehouseBinary(), ["admin", "keys", "revoke", "AAAAAAAAAAAAAAAA"], environment: stack.environment)
        #expect(unknown.status == 1 && unknown.stderr.contains("admin_key_not_found"), "\(unknown.stderr)")
        let badScope = try await runProcess(
            try gatehouseBinary(), ["admin", "keys", "create", "--name", "x", "--scope", "root"], environment: stack.environment)
        #expect(badScope.status == 1 && badScope.stderr.contains("unknown scope root"), "\(badScope.stderr)")

        // The public gateway knows nothing of the admin surface.
        let publicPort = try await stack.request("GET", "/admin/v1/users", headers: ["Authorization": "Bearer \(reader)"])
        #expect(publicPort.status == 404)
        let document = try await stack.request("GET", "/admin/openapi.json", port: stack.adminPort)
        #expect(document.status == 200 && (document.json["info"] as? [String: Any])?["title"] as? String == "Gatehouse admin API")
    }

    @Test("users: create (password from stdin) then sign in; list with filters and pages; get; update email and password (sessions revoked); sessions; revoke-sessions; a reset link that works; delete; each write in the audit log with the key")
    func userOperations() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let created = try await runUsersCommand(
            stack, ["create", "--email", "Made@Example.com", "--password-stdin", "--email-verified", "--display-name", "Made", "--json"],
            stdin: Data("\(password)\n".utf8))
        #expect(created.status == 0, "\(created.stderr)")
        let made = try #require(jsonLines(created.stdout).first)
        let id = try #require(made["id"] as? String)
        #expect(made["emailVerified"] as? Bool == true && made["displayName"] as? String == "Made" && made["disabled"] as? Bool == false)
        let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": "made@example.com", "password": password])
        #expect(signIn.status == 200)
        let access = try #require((signIn.json["session"] as? [String: Any])?["accessToken"] as? String)
        let other = try await signUpUser(stack, "other@example.com")
        let weak = try await runUsersCommand(stack, ["create", "--email", "weak@example.com", "--password-stdin"], stdin: Data("password\n".utf8))
        #expect(weak.status == 1 && weak.stderr.contains("weak_password"), "\(weak.stderr)")
        let taken = try await runUsersCommand(stack, ["create", "--email", "other@example.com"])
        #expect(taken.status == 1 && taken.stderr.contains("email_exists"), "\(taken.stderr)")

        // Search and pages.
        let byPrefix = try await runUsersCommand(stack, ["list", "--email-prefix", "MADE", "--json"])
        #expect(jsonLines(byPrefix.stdout).map { $0["id"] as? String } == [id])
        let table = try await runUsersCommand(stack, ["list"])
        #expect(table.status == 0 && table.stdout.hasPrefix("ID") && table.stdout.contains("made@example.com") == false && table.stdout.contains("Made@Example.com"))
        let key = try await stack.adminKey()
        let first = try await admin(stack, "GET", "/admin/v1/users?limit=1", key: key)
        let cursor = try #require(first.json["nextCursor"] as? String)
        let second = try await admin(stack, "GET", "/admin/v1/users?limit=1&cursor=\(cursor)", key: key)
        let ids = ((first.json["users"] as? [[String: Any]]) ?? []) + ((second.json["users"] as? [[String: Any]]) ?? [])
        #expect(Set(ids.compactMap { $0["id"] as? String }) == [id, other.id])
        #expect(second.json["nextCursor"] is NSNull)
        let badLimit = try await admin(stack, "GET", "/admin/v1/users?limit=5000", key: key)
        #expect(badLimit.status == 422 && badLimit.json["code"] as? String == "invalid_argument")
        let disabledOnly = try await admin(stack, "GET", "/admin/v1/users?disabled=true", key: key)
        #expect((disabledOnly.json["users"] as? [Any])?.isEmpty == true)

        // Update: a new address and password end the user's sessions.
        let updated = try await runUsersCommand(stack, ["update", id, "--email", "moved@example.com", "--password-stdin", "--json"], stdin: Data("another fine passphrase\n".utf8))
        #expect(updated.status == 0, "\(updated.stderr)")
        #expect(jsonLines(updated.stdout).first?["email"] as? String == "moved@example.com")
        #expect(jsonLines(updated.stdout).first?["emailVerified"] as? Bool == false)
        try await waitUntil("the old session refused", timeout: .seconds(5), interval: .milliseconds(50)) {
            try await stack.request("GET", "/v1/me", bearer: access).status == 401
        }
        let again = try await stack.request("POST", "/v1/sessions", json: ["email": "moved@example.com", "password": "another fine passphrase"])
        #expect(again.status == 200)
        let sessions = try await runUsersCommand(stack, ["sessions", id, "--json"])
        #expect(jsonLines(sessions.stdout).count == 2)
        let revoked = try await runUsersCommand(stack, ["revoke-sessions", id])
        #expect(revoked.status == 0 && revoked.stdout.contains("1 sessions of user \(id) revoked"), "\(revoked.stdout)\(revoked.stderr)")

        // A reset link, not mailed: its code sets a new password over the public API.
        let link = try await runUsersCommand(stack, ["link", id, "--kind", "password-reset", "--json"])
        #expect(link.status == 0, "\(link.stderr)")
        let code = try #require(jsonLines(link.stdout).first?["code"] as? String)
        let reset = try await stack.request("POST", "/v1/password-reset/confirm", json: ["code": code, "password": "third fine passphrase"])
        #expect(reset.status == 200 || reset.status == 204, "\(String(decoding: reset.body, as: UTF8.self))")
        #expect(try await stack.request("POST", "/v1/sessions", json: ["email": "moved@example.com", "password": "third fine passphrase"]).status == 200)

        let claims = try await runUsersCommand(stack, ["set-claims", id, #"{"plan":"pro"}"#])
        #expect(claims.status == 0)
        let shown = try await runUsersCommand(stack, ["get", id, "--json"])
        #expect((jsonLines(shown.stdout).first?["customClaims"] as? [String: Any])?["plan"] as? String == "pro")
        #expect(try await runUsersCommand(stack, ["delete", id]).status == 0)
        let gone = try await runUsersCommand(stack, ["get", id])
        #expect(gone.status == 1 && gone.stderr.contains("user_not_found"))

        // Every write is in the audit log with the key that made it.
        let keyID = "admin_key:" + String(key.dropFirst(4).prefix(16))
        let audit = try await admin(stack, "GET", "/admin/v1/audit?userId=\(id)", key: key)
        let events = (audit.json["events"] as? [[String: Any]]) ?? []
        let byKey = events.filter { $0["actor"] as? String == keyID }.compactMap { $0["kind"] as? String }
        #expect(byKey == ["user.created", "user.updated", "user.sessions_revoked", "action_link.generated", "claims.set", "user.deleted"])
        // With the admin client's address as the admin listener saw it.
        #expect(events.filter { $0["actor"] as? String == keyID }.allSatisfy { $0["ip"] as? String == "127.0.0.1" })
        #expect(events.contains { $0["kind"] as? String == "sessions.revoked" && $0["source"] as? String == "token" })
        #expect(audit.json["more"] as? Bool == false)
    }

    @Test("under gatehouse serve (no RPC endpoint outside the process), --data-dir makes a key on the database file, and the admin API serves it")
    func serveWithDataDir() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("serve")
        try await stack.waitReady()
        _ = try await signUpUser(stack, "serve@example.com")
        let made = try await runProcess(
            try gatehouseBinary(), ["admin", "keys", "create", "--name", "local", "--scope", "users:read", "--data-dir", stack.dataDir.path],
            environment: stack.environment)
        #expect(made.status == 0, "\(made.stderr)")
        let key = String(made.stdout.split(separator: "\n").first ?? "")
        let listed = try await admin(stack, "GET", "/admin/v1/users?emailPrefix=serve", key: key)
        #expect(listed.status == 200 && (listed.json["users"] as? [Any])?.count == 1, "\(String(decoding: listed.body, as: UTF8.self))")
        let keys = try await runProcess(
            try gatehouseBinary(), ["admin", "keys", "list", "--data-dir", stack.dataDir.path], environment: stack.environment)
        #expect(keys.status == 0 && keys.stdout.contains("local") && keys.stdout.contains("active"), "\(keys.stdout)\(keys.stderr)")
        let nowhere = try await runProcess(
            try gatehouseBinary(), ["admin", "keys", "list", "--data-dir", stack.dataDir.appendingPathComponent("nope").path],
            environment: stack.environment)
        #expect(nowhere.status == 1 && nowhere.stderr.contains("no identity database"), "\(nowhere.stderr)")
        // The audit log of the embedded default, read from its files.
        let audit = try await runProcess(
            try gatehouseBinary(), ["audit", "tail", "--json", "--data-dir", stack.dataDir.path], environment: stack.environment)
        #expect(audit.status == 0, "\(audit.stderr)")
        #expect(jsonLines(audit.stdout).compactMap { $0["kind"] as? String } == ["sign_up", "admin_key.created"])
    }
}
