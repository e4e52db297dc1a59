import Foundation
import GatehouseTestSupport
import Testing

/// `gatehouse users ARGS` against the stack's running identity service: its admin listener with
/// an admin key of every scope (GATEHOUSE_ADMIN_URL, GATEHOUSE_ADMIN_KEY), or, for import and
/// export, its RPC endpoint (GATEHOUSE_IDENTITY_URL, plain loopback tcp allowed).
func runUsersCommand(_ stack: Stack, _ arguments: [String], stdin: Data? = nil) async throws -> ProcessResult {
    var environment = stack.environment
    if !["import", "export"].contains(arguments.first ?? "") { environment["GATEHOUSE_ADMIN_KEY"] = try await stack.adminKey() }
    return try await runProcess(try gatehouseBinary(), ["users"] + arguments, environment: environment, stdin: stdin)
}

/// Signs up `email` and returns the user id, access token and refresh token.
func signUpUser(_ stack: Stack, _ email: String, password: String = "glacier lantern marmalade", extra: [String: Any] = [:]) async throws
    -> (id: String, access: String, refresh: String, body: [String: Any])
{
    let created = try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": password].merging(extra) { $1 })
    guard created.status == 201, let user = created.json["user"] as? [String: Any], let session = created.json["session"] as? [String: Any],
        let id = user["id"] as? String, let access = session["accessToken"] as? String, let refresh = session["refreshToken"] as? String
    else { throw StackError("sign-up of \(email) answered \(created.status): \(String(decoding: created.body, as: UTF8.self))") }
    return (id, access, refresh, created.json)
}

@Suite("gatehouse users against three processes")
struct AdminCLIEndToEndTests {
    @Test("A10: disable → sign-in user_disabled, refresh refused, access token refused; enable → sign-in works again")
    func disableAndEnable() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let password = "glacier lantern marmalade"
        let b = try await signUpUser(stack, "b@example.com")
        #expect(try await stack.request("GET", "/v1/me", bearer: b.access).status == 200)

        let disabled = try await runUsersCommand(stack, ["disable", b.id])
        #expect(disabled.status == 0, "\(disabled.stderr)")
        #expect(disabled.stdout == "user \(b.id) disabled; its sessions are revoked\n")
        let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": "b@example.com", "password": password])
        #expect(signIn.status == 403 && signIn.json["code"] as? String == "user_disabled")
        let refresh = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": b.refresh])
        #expect(refresh.status == 401, "\(String(decoding: refresh.body, as: UTF8.self))")
        // The gateway learns of the revocation from the token service's feed (about one heartbeat).
        try await waitUntil("B's access token refused at the gateway", timeout: .seconds(5), interval: .milliseconds(50)) {
            try await stack.request("GET", "/v1/me", bearer: b.access).status == 401
        }

        let enabled = try await runUsersCommand(stack, ["enable", b.id])
        #expect(enabled.status == 0, "\(enabled.stderr)")
        #expect(enabled.stdout == "user \(b.id) enabled\n")
        let again = try await stack.request("POST", "/v1/sessions", json: ["email": "b@example.com", "password": password])
        #expect(again.status == 200)
        let access = ((again.json["session"] as? [String: Any])?["accessToken"] as? String) ?? ""
        #expect(try await stack.request("GET", "/v1/me", bearer: access).status == 200)
        // The old session stays revoked.
        #expect(try await stack.request("GET", "/v1/me", bearer: b.access).status == 401)

        // An unknown user: exit 1 and one clear line.
        let unknown = try await runUsersCommand(stack, ["disable", "AAAAAAAAAAAAAAAAAAAAAA"])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("(user_not_found)"), "\(unknown.stderr)")
        #expect(unknown.stdout.isEmpty)
        // Ids are base64url: one in 64 starts with '-', and is still an id, not a flag.
        let dashed = try await runUsersCommand(stack, ["disable", "-AAAAAAAAAAAAAAAAAAAAA"])
        #expect(dashed.status == 1)
        #expect(dashed.stderr.contains("(user_not_found)"), "\(dashed.stderr)")
    }

    @Test("set-claims: the claims are in the next refreshed token; reserved names, oversize and bad JSON are refused clearly")
    func setClaims() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let u = try await signUpUser(stack, "claims@example.com")
        let set = try await runUsersCommand(stack, ["set-claims", u.id, #"{"role":"admin","tier":2}"#])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout.contains("set"))
        #expect(jwtClaims(u.access)["role"] == nil)
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": u.refresh])
        #expect(refreshed.status == 200)
        let session = try #require(refreshed.json["session"] as? [String: Any])
        let next = try #require(session["accessToken"] as? String)
        #expect(jwtClaims(next)["role"] as? String == "admin")
        #expect(jwtClaims(next)["tier"] as? Int == 2)
        #expect(try await stack.request("GET", "/v1/me", bearer: next).status == 200)

        let reserved = try await runUsersCommand(stack, ["set-claims", u.id, #"{"role":"x","sub":"someone-else"}"#])
        #expect(reserved.status == 1)
        #expect(reserved.stderr.contains("`sub` is a reserved claim name"), "\(reserved.stderr)")
        let big = try await runUsersCommand(stack, ["set-claims", u.id, #"{"k":""# + String(repeating: "v", count: 1000) + #""}"#])
        #expect(big.status == 1)
        #expect(big.stderr.contains("larger than 1000 bytes"), "\(big.stderr)")
        let notJSON = try await runUsersCommand(stack, ["set-claims", u.id, "{role: admin"])
        #expect(notJSON.status == 1)
        #expect(notJSON.stderr.contains("not JSON"), "\(notJSON.stderr)")

        // Cleared: the next refresh carries none.
        let cleared = try await runUsersCommand(stack, ["set-claims", u.id, "{}"])
        #expect(cleared.status == 0 && cleared.stdout.contains("cleared"))
        let rt = try #require(session["refreshToken"] as? String)
        let third = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": rt])
        let thirdAccess = ((third.json["session"] as? [String: Any])?["accessToken"] as? String) ?? ""
        #expect(jwtClaims(thirdAccess)["sub"] as? String == u.id)
        #expect(jwtClaims(thirdAccess)["role"] == nil)
    }

    @Test("no admin listener at the URL: exit 1 with a line naming it; no key: exit 1 naming the setting")
    func noService() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        var environment = stack.environment
        environment["GATEHOUSE_RPC_TIMEOUT_MS"] = "300"
        environment["GATEHOUSE_ADMIN_KEY"] = "gha_AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        let result = try await runProcess(try gatehouseBinary(), ["users", "enable", "AAAAAAAAAAAAAAAAAAAAAA"], environment: environment)
        #expect(result.status == 1)
        #expect(result.stderr.contains("no answer from the admin API at \(environment["GATEHOUSE_ADMIN_URL"] ?? "")"), "\(result.stderr)")
        environment["GATEHOUSE_ADMIN_KEY"] = nil
        let keyless = try await runProcess(try gatehouseBinary(), ["users", "list"], environment: environment)
        #expect(keyless.status == 1)
        #expect(keyless.stderr.contains("GATEHOUSE_ADMIN_KEY"), "\(keyless.stderr)")
    }

    @Test("over CURVE: the identity service's own key pair makes an admin key, another role's key is refused before any call; the key then disables a user")
    func overCurve() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let keys = try await stack.curveKeyEnvironments()
        let identity = keys["identity"] ?? [:], gateway = keys["gateway"] ?? [:]
        for role in ["identity", "token", "gateway"] { try stack.start(role, environment: keys[role] ?? [:]) }
        try await stack.waitReady()
        let u = try await signUpUser(stack, "curve@example.com")
        func run(_ extra: [String: String], _ arguments: [String]) async throws -> ProcessResult {
            try await runProcess(
                try gatehouseBinary(), arguments, environment: stack.environment.merging(extra) { $1 }.merging(["GATEHOUSE_RPC_TIMEOUT_MS": "1000"]) { $1 })
        }
        let create = ["admin", "keys", "create", "--name", "ops", "--scope", "users:write"]
        let asGateway = try await run(gateway, create)
        #expect(asGateway.status == 1)
        #expect(asGateway.stderr.contains("another role's key"), "\(asGateway.stderr)")
        let plain = try await run([:], create)
        #expect(plain.status == 1)
        #expect(plain.stderr.contains("no answer from the identity service"), "\(plain.stderr)")

        let made = try await run(identity, create)
        #expect(made.status == 0, "\(made.stderr)")
        let key = String(made.stdout.split(separator: "\n").first ?? "")
        #expect(key.hasPrefix("gha_") && key.count == 64)
        let disabled = try await run(["GATEHOUSE_ADMIN_KEY": key], ["users", "disable", u.id])
        #expect(disabled.status == 0, "\(disabled.stderr)")
        let refused = try await stack.request("POST", "/v1/sessions", json: ["email": "curve@example.com", "password": "glacier lantern marmalade"])
        #expect(refused.json["code"] as? String == "user_disabled")
    }
}
