import Foundation
import GatehouseSupport
import GatehouseTestSupport
import Testing

/// Rotating the JWT signing keys (issue 35 §5) against three processes: `gatehouse keys
/// rotate-signing` through the admin API, and the token role's schedule
/// (`GATEHOUSE_SIGNING_KEY_ROTATION_DAYS`); the clock is moved, never waited for.
@Suite("Signing key rotation against three processes")
struct SigningKeyRotationEndToEndTests {
    let password = "glacier lantern marmalade"

    /// The `kid` in a JWT's header.
    func kid(_ token: String) -> String? {
        guard let part = token.split(separator: ".").first, let header = Base64URL.decode(part) else { return nil }
        return (try? JSONSerialization.jsonObject(with: header) as? [String: Any])?["kid"] as? String
    }

    /// A new sign-in's access token.
    func signIn(_ stack: Stack, _ email: String) async throws -> String {
        let r = try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": password])
        guard r.status == 200, let token = (r.json["session"] as? [String: Any])?["accessToken"] as? String else {
            throw StackError("sign-in answered \(r.status): \(String(decoding: r.body, as: UTF8.self))")
        }
        return token
    }

    /// The kids of the gateway's `/.well-known/jwks.json`, and the document.
    func jwks(_ stack: Stack) async throws -> (kids: Set<String>, json: String) {
        let r = try await stack.request("GET", "/.well-known/jwks.json")
        let keys = r.json["keys"] as? [[String: Any]] ?? []
        return (Set(keys.compactMap { $0["kid"] as? String }), String(decoding: r.body, as: UTF8.self))
    }

    /// A key of `scope`, made with `gatehouse admin keys create`.
    func makeKey(_ stack: Stack, _ name: String, _ scope: String) async throws -> String {
        let made = try await runProcess(
            try gatehouseBinary(), ["admin", "keys", "create", "--name", name, "--scope", scope], environment: stack.environment)
        try #require(made.status == 0, "\(made.stderr)")
        return String(made.stdout.split(separator: "\n").first ?? "")
    }

    /// `gatehouse keys rotate-signing ARGS` with the admin key `key`.
    func rotate(_ stack: Stack, key: String, _ arguments: [String] = []) async throws -> ProcessResult {
        var environment = stack.environment
        environment["GATEHOUSE_ADMIN_KEY"] = key
        return try await runProcess(try gatehouseBinary(), ["keys", "rotate-signing"] + arguments, environment: environment)
    }

    /// The token service's `signing_key.rotated` events in the admin API's audit log.
    func rotationEvents(_ stack: Stack) async throws -> [[String: Any]] {
        let r = try await stack.request(
            "GET", "/admin/v1/audit?limit=1000", headers: ["Authorization": "Bearer \(try await stack.adminKey())"], port: stack.adminPort)
        return (r.json["events"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == "signing_key.rotated" }
    }

    /// Verifies each of `tokens` with PyJWT against the JWKS document `jwks` (the key picked by
    /// the token's `kid`); the kids it verified with, in order, or the script's error.
    func pyjwtVerify(_ jwks: String, _ tokens: [String]) async throws -> (status: Int32, output: String, error: String) {
        let script = """
            import sys, jwt
            keys = jwt.PyJWKSet.from_json(sys.argv[1])
            for token in sys.argv[2:]:
                kid = jwt.get_unverified_header(token)["kid"]
                key = keys[kid]
                # The processes' clock is moved ahead of this one: the signature and the kid are what is checked.
                jwt.decode(token, key.key, algorithms=[key.algorithm_name], options={"verify_exp": False, "verify_iat": False, "verify_nbf": False, "verify_aud": False})
                print(kid)
            """
        let result = try await runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", script, jwks] + tokens)
        return (result.status, result.stdout, result.stderr)
    }

    @Test("rotate-signing: 403 insufficient_scope without signing_keys; with it a new kid signs new tokens, old and new tokens pass /v1/me and PyJWT through the JWKS, audited with admin_key:<id>; the old kid leaves the JWKS after its last token expired")
    func rotateThroughTheAdminAPI() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let user = try await signUpUser(stack, "rotate@example.com")
        let a = try await signIn(stack, "rotate@example.com")
        let k1 = try #require(kid(a))
        #expect(kid(user.access) == k1)

        // A key without the scope (even one with every other): refused, nothing rotated.
        let others = try await makeKey(stack, "others", "users:read,users:write,sessions,claims,audit")
        let refused = try await rotate(stack, key: others)
        #expect(refused.status == 1 && refused.stdout.isEmpty)
        #expect(refused.stderr.contains("insufficient_scope") && refused.stderr.contains("signing_keys"), "\(refused.stderr)")
        let http = try await stack.request("POST", "/admin/v1/signing-keys/rotate", headers: ["Authorization": "Bearer \(others)"], port: stack.adminPort)
        #expect(http.status == 403 && http.json["code"] as? String == "insufficient_scope")
        let none = try await stack.request("POST", "/admin/v1/signing-keys/rotate", port: stack.adminPort)
        #expect(none.status == 401 && none.json["code"] as? String == "invalid_admin_key")
        #expect(try await rotationEvents(stack).isEmpty)

        let rotator = try await makeKey(stack, "rotator", "signing_keys")
        let rotated = try await rotate(stack, key: rotator)
        #expect(rotated.status == 0, "\(rotated.stderr)")
        let lines = rotated.stdout.split(separator: "\n").map(String.init)
        let k2 = try #require(lines.first { $0.hasPrefix("new signing key: ") }.map { String($0.dropFirst("new signing key: ".count)) })
        #expect(k2 != k1 && !k2.isEmpty)
        #expect(lines.contains { $0.hasPrefix("signs from: 20") }, "\(rotated.stdout)")
        #expect(lines.contains { $0.hasPrefix("previous key: \(k1), published until 20") }, "\(rotated.stdout)")
        #expect(lines.contains("published keys: \([k1, k2].sorted().joined(separator: ", "))"), "\(rotated.stdout)")

        // Audited in the token service's log, with the key as the actor.
        let events = try await rotationEvents(stack)
        #expect(events.count == 1)
        #expect(events.first?["actor"] as? String == "admin_key:\(rotator.dropFirst(4).prefix(16))")
        #expect(events.first?["source"] as? String == "token")
        #expect((events.first?["detail"] as? [String: Any])?["kid"] as? String == k2)

        // One token instance: the new key signs at once. Past the gateway's least interval
        // between JWKS fetches, a token of an unknown kid makes it fetch the document again.
        stack.advanceClock(by: .seconds(10))
        let b = try await signIn(stack, "rotate@example.com")
        #expect(kid(b) == k2)
        #expect(try await stack.request("GET", "/v1/me", bearer: a).status == 200)
        #expect(try await stack.request("GET", "/v1/me", bearer: b).status == 200)
        let published = try await jwks(stack)
        #expect(published.kids == [k1, k2])
        let verified = try await pyjwtVerify(published.json, [a, b])
        #expect(verified.status == 0, "\(verified.error)")
        #expect(verified.output == "\(k1)\n\(k2)\n")

        // --json: the admin API's answer, for scripts.
        let again = try await rotate(stack, key: rotator, ["--json"])
        #expect(again.status == 0, "\(again.stderr)")
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
        let k3 = try #require(reply["kid"] as? String)
        #expect(reply["previousKid"] as? String == k2 && reply["activatesAt"] is String && reply["previousRetiresAt"] is String)
        #expect(Set(reply["publishedKids"] as? [String] ?? []) == [k1, k2, k3])

        // A's expiry (15 minutes) plus the leeway (30 s) after K2 stopped signing: K1 leaves the
        // JWKS (the gateway's copy too, its one minute cache long past); K2's last token (B)
        // expired just as long after K3 started, so K2 goes with it.
        stack.advanceClock(by: .seconds(900 + 30 + 1))
        let later = try await jwks(stack)
        #expect(later.kids == [k3], "\(later.kids)")
        #expect(try await stack.request("GET", "/v1/me", bearer: a).status == 401)
        let c = try await signIn(stack, "rotate@example.com")
        #expect(kid(c) == k3)
        #expect(try await stack.request("GET", "/v1/me", bearer: c).status == 200)
    }

    @Test("GATEHOUSE_SIGNING_KEY_ROTATION_DAYS: past the days a new kid signs without any command, audited as the system's; the old kid stays published beside it")
    func scheduledRotation() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity")
        try stack.start("token", environment: ["GATEHOUSE_SIGNING_KEY_ROTATION_DAYS": "2"])
        try stack.start("gateway")
        try await stack.waitReady()
        _ = try await signUpUser(stack, "schedule@example.com")
        let a = try await signIn(stack, "schedule@example.com")
        let k1 = try #require(kid(a))

        // A day and a half: not yet (the token role checks every second).
        stack.advanceClock(by: .seconds(36 * 3600))
        try await Task.sleep(for: .milliseconds(1500))
        #expect(kid(try await signIn(stack, "schedule@example.com")) == k1)

        // Past two days: a new key, without any command.
        stack.advanceClock(by: .seconds(12 * 3600 + 1))
        var rotated: String?
        for _ in 0..<100 where rotated == nil {
            if let signed = kid(try await signIn(stack, "schedule@example.com")), signed != k1 { rotated = signed } else {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        let k2 = try #require(rotated, "no new key within 10 s of the due time")
        let latest = try await signIn(stack, "schedule@example.com")
        #expect(kid(latest) == k2)
        let events = try await rotationEvents(stack)
        #expect(events.count == 1)
        #expect(events.first?["actor"] as? String == "system" && events.first?["reason"] as? String == "scheduled")
        // Once the gateway's cached JWKS (a minute) expired: both keys are published; the new key's tokens pass.
        stack.advanceClock(by: .seconds(61))
        let published = try await jwks(stack)
        #expect(published.kids == [k1, k2])
        #expect(try await stack.request("GET", "/v1/me", bearer: latest).status == 200)
        // One rotation per due time: no other key a few checks later.
        try await Task.sleep(for: .milliseconds(1500))
        #expect(try await rotationEvents(stack).count == 1)
    }
}
