import Foundation
import GatehouseTestSupport
import Testing

/// Drives every endpoint of a running stack over real HTTP.
func exerciseAPI(_ stack: Stack) async throws {
    let email = "e2e-\(UUID().uuidString.prefix(8))@example.com"
    // Sign-up.
    let signUp = try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": "correct horse battery", "displayName": "Ada"])
    #expect(signUp.status == 201)
    #expect(signUp.headers["x-request-id"] != nil)
    let user = signUp.json["user"] as? [String: Any]
    let session = signUp.json["session"] as? [String: Any]
    #expect(user?["email"] as? String == email)
    #expect(session?["tokenType"] as? String == "Bearer")
    #expect(session?["expiresIn"] as? Int == 900)
    // Duplicate, weak password, bad email.
    #expect(try await stack.request("POST", "/v1/accounts", json: ["email": email.uppercased(), "password": "correct horse battery"]).json["code"] as? String == "email_exists")
    let weak = try await stack.request("POST", "/v1/accounts", json: ["email": "w-\(email)", "password": "password"])
    #expect(weak.status == 422 && weak.json["code"] as? String == "weak_password")
    #expect(try await stack.request("POST", "/v1/accounts", json: ["email": "not an email", "password": "correct horse battery"]).json["code"] as? String == "invalid_email")
    // Malformed input.
    let malformed = try await stack.request("POST", "/v1/accounts", rawBody: Data("{nope".utf8), headers: ["Content-Type": "application/json"])
    #expect(malformed.status == 400 && malformed.headers["content-type"]?.hasPrefix("application/problem+json") == true)
    #expect(try await stack.request("POST", "/v1/accounts", rawBody: Data("x".utf8), headers: ["Content-Type": "text/plain"]).status == 415)
    #expect(try await stack.request("POST", "/v1/accounts", json: ["email": 5, "password": true]).status == 400)
    // Sign-in: unknown email and wrong password look alike.
    let wrong = try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": "wrong password here"])
    let unknown = try await stack.request("POST", "/v1/sessions", json: ["email": "nobody-\(email)", "password": "wrong password here"])
    #expect(wrong.status == 401 && unknown.status == 401)
    #expect(wrong.body == unknown.body)
    #expect(wrong.headers["www-authenticate"] == unknown.headers["www-authenticate"])
    let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": "correct horse battery"])
    #expect(signIn.status == 200)
    let tokens = signIn.json["session"] as! [String: Any]
    let access = tokens["accessToken"] as! String
    let refresh = tokens["refreshToken"] as! String
    // Me.
    let me = try await stack.request("GET", "/v1/me", bearer: access)
    #expect(me.status == 200 && me.json["email"] as? String == email)
    let noToken = try await stack.request("GET", "/v1/me")
    #expect(noToken.status == 401 && noToken.headers["www-authenticate"] != nil)
    let badToken = try await stack.request("GET", "/v1/me", bearer: "x.y.z")
    #expect(badToken.status == 401 && badToken.headers["www-authenticate"]?.contains("invalid_token") == true)
    // Patch.
    let patched = try await stack.request("PATCH", "/v1/me", json: ["displayName": "Countess", "settings": ["theme": "dark"]], bearer: access)
    #expect(patched.status == 200 && patched.json["displayName"] as? String == "Countess")
    #expect((patched.json["settings"] as? [String: Any])?["theme"] as? String == "dark")
    // Password strength, discovery, health, metrics, OpenAPI.
    let strength = try await stack.request("POST", "/v1/password-strength", json: ["password": "password"])
    #expect(strength.status == 200 && (strength.json["score"] as? Int ?? 9) <= 1)
    let jwks = try await stack.request("GET", "/.well-known/jwks.json")
    #expect(jwks.status == 200 && ((jwks.json["keys"] as? [Any])?.count ?? 0) >= 1)
    let discovery = try await stack.request("GET", "/.well-known/openid-configuration")
    #expect(discovery.json["jwks_uri"] as? String == stack.baseURL + "/.well-known/jwks.json")
    #expect(try await stack.request("GET", "/healthz").status == 200)
    let metrics = String(decoding: try await stack.request("GET", "/metrics").body, as: UTF8.self)
    #expect(metrics.contains("http_requests"))
    // RPC latency by method and outcome, as the gateway saw it.
    #expect(metrics.contains(#"gatehouse_rpc_call_duration_seconds_count{service="identity",method="identity.signUp",code="ok"}"#), "\(metrics)")
    #expect(metrics.contains(#"gatehouse_rpc_call_duration_seconds_count{service="identity",method="identity.signUp",code="email_exists"}"#))
    #expect(metrics.contains(#"gatehouse_rpc_call_duration_seconds_count{service="identity",method="identity.signIn",code="invalid_credentials"}"#))
    // The identity service's hashing pool, asked at the scrape: a sign-up, two failed sign-ins and
    // a sign-in have each hashed once (the duplicate and the weak password were refused before hashing).
    func gauge(_ name: String) -> Int? {
        metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "").map { Int($0) } }
    }
    #expect(gauge("gatehouse_identity_stats_up") == 1)
    #expect((gauge("gatehouse_identity_hash_pool_workers") ?? 0) >= 1)
    #expect(gauge("gatehouse_identity_hash_pool_queue_depth") == 0)
    #expect(gauge("gatehouse_identity_hash_pool_queue_limit") == 64)
    #expect((gauge("gatehouse_identity_hash_pool_completed_jobs") ?? 0) >= 4)
    #expect(try await stack.request("GET", "/openapi.json").json["openapi"] as? String == "3.2.0")
    #expect(try await stack.request("GET", "/nowhere").status == 404)
    // Refresh rotates; reuse after the grace window is covered by the token service's tests.
    let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": refresh])
    #expect(refreshed.status == 200)
    let rotated = (refreshed.json["session"] as? [String: Any])?["refreshToken"] as? String
    #expect(rotated != nil && rotated != refresh)
    #expect(try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": "bogus"]).json["code"] as? String == "invalid_refresh_token")
    // Sign out this session: its refresh token stops working and its access token is refused.
    #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: access).status == 204)
    #expect(try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": rotated ?? ""]).status == 401)
    #expect(try await stack.request("GET", "/v1/me", bearer: access).status == 401)
    // Sign out everywhere: another session's access token is refused once the revocation arrives.
    let other = try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": "correct horse battery"])
    let otherAccess = (other.json["session"] as? [String: Any])?["accessToken"] as? String ?? ""
    let third = try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": "correct horse battery"])
    let thirdAccess = (third.json["session"] as? [String: Any])?["accessToken"] as? String ?? ""
    #expect(try await stack.request("DELETE", "/v1/sessions", bearer: otherAccess).status == 204)
    try await waitUntil("the revocation feed reaching the gateway", interval: .milliseconds(20)) {
        try await stack.request("GET", "/v1/me", bearer: thirdAccess).status == 401
    }
}

@Suite("End to end over HTTP", .serialized)
struct EndToEndTests {
    @Test("three processes: identity, token and gateway over tcp")
    func threeProcesses() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        try await exerciseAPI(stack)
    }

    @Test("three processes over CURVE with a key set from `gatehouse keys generate`")
    func threeProcessesOverCurve() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let keys = try await stack.curveKeyEnvironments()
        for role in ["identity", "token", "gateway"] { try stack.start(role, environment: keys[role] ?? [:]) }
        try await stack.waitReady()
        // Sign-up crosses gateway → identity → token; sign-out everywhere needs the token → gateway event feed.
        try await exerciseAPI(stack)
    }

    @Test("one process: gatehouse serve")
    func serve() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("serve")
        try await stack.waitReady()
        try await exerciseAPI(stack)
    }

    @Test("a killed service gives 503 within the deadline, and the gateway recovers when it is back")
    func serviceKilled() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        await stack.kill("identity")
        let start = ContinuousClock.now
        let down = try await stack.request("POST", "/v1/password-strength", json: ["password": "whatever it is"])
        #expect(down.status == 503)
        #expect(down.json["code"] as? String == "service_unavailable")
        #expect(ContinuousClock.now - start < .seconds(4))
        #expect(try await stack.request("GET", "/readyz").status == 503)
        try stack.start("identity")
        try await stack.waitReady()
        let up = try await stack.request("POST", "/v1/password-strength", json: ["password": "whatever it is"])
        #expect(up.status == 200)
    }
}

@Suite("README quick start")
struct QuickStartTests {
    @Test("gatehouse serve prints where the API, the admin API and the mail are, and the command that makes the first admin key, which works as printed")
    func serveBanner() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("serve", captureLog: true)
        try await stack.waitReady()
        let banner = try #require(try await stack.waitForLogLine(of: "serve", containing: "first admin API key:"))
        let log = stack.log(of: "serve")
        #expect(log.contains("  API        http://127.0.0.1:\(stack.httpPort)  "))
        #expect(log.contains("  admin API  http://127.0.0.1:\(stack.adminPort)/admin/v1  "))
        #expect(log.contains("  mail       kept in \(stack.dataDir.appendingPathComponent("mailbox").path) "))
        let command = try #require(banner.components(separatedBy: "first admin API key:").last).split(separator: " ").map(String.init)
        #expect(command.first == (try gatehouseBinary().path))
        let made = try await runProcess(try gatehouseBinary(), Array(command.dropFirst()), environment: stack.environment)
        #expect(made.status == 0, "\(made.stderr)")
        let key = try #require(made.stdout.split(whereSeparator: \.isWhitespace).first { $0.hasPrefix("gha_") }.map(String.init))
        let users = try await runProcess(try gatehouseBinary(), ["users", "list"], environment: stack.environment.merging(["GATEHOUSE_ADMIN_KEY": key]) { $1 })
        #expect(users.status == 0, "\(users.stderr)")
    }

    @Test("gatehouse --help names every command, one line each within 80 columns")
    func helpListsEveryCommand() async throws {
        let help = try await runProcess(try gatehouseBinary(), ["--help"], environment: ["COLUMNS": "80"])
        #expect(help.status == 0)
        let listed = help.stdout.components(separatedBy: "Every command").last?.components(separatedBy: "USAGE:").first ?? ""
        let lines = listed.split(separator: "\n").dropFirst().filter { $0.hasPrefix("  ") }
        for command in [
            "serve", "identity", "token", "gateway", "healthcheck", "keys generate", "keys rotate-signing", "backup", "restore",
            "users list", "users import", "users export", "mail list", "audit tail", "audit export", "admin keys create",
            "store copy", "config reference",
        ] {
            #expect(lines.contains { $0.hasPrefix("  \(command) ") }, "--help does not list \(command)")
        }
        for line in lines { #expect(line.count <= 80, "wraps: \(line)") }
    }

    @Test("the README's curl commands work against gatehouse serve")
    func quickStart() async throws {
        let readme = try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "<!-- quickstart -->\n```sh\n"))
        let end = try #require(readme.range(of: "```\n<!-- /quickstart -->"))
        let script = String(readme[start.upperBound..<end.lowerBound])
        #expect(readme.contains("scripts/run"))
        #expect(try String(contentsOf: BuiltProducts.packageRoot.appendingPathComponent("scripts/run"), encoding: .utf8).contains("gatehouse serve"))
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("serve")
        try await stack.waitReady()
        let result = try await runProcess(
            URL(fileURLWithPath: "/bin/bash"),
            ["-euo", "pipefail", "-c", script.replacingOccurrences(of: "localhost:8080", with: "127.0.0.1:\(stack.httpPort)")])
        let output = result.stdout
        #expect(result.status == 0, "\(result.stderr)")
        #expect(output.contains(#""email":"ada@example.com""#))
        #expect(output.components(separatedBy: #""accessToken""#).count == 3, "sign-up and refresh each print a session: \(output)")
        #expect(output.hasSuffix("}") || output.hasSuffix("}\n"))
        #expect(!output.contains("\"code\""), "an error came back: \(output)")
    }
}
