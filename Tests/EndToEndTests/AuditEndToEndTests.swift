import Foundation
import GatehouseTestSupport
import Testing

/// `gatehouse audit ARGS` against the stack's running identity and token services (its
/// environment: both RPC endpoints, plain loopback tcp allowed).
func runAuditCommand(_ stack: Stack, _ arguments: [String], environment extra: [String: String] = [:]) async throws -> ProcessResult {
    try await runProcess(try gatehouseBinary(), ["audit"] + arguments, environment: stack.environment.merging(extra) { $1 })
}

/// The JSON objects of `text`, one per line.
func jsonLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
}

@Suite("Audit log against three processes")
struct AuditEndToEndTests {
    let password = "glacier lantern marmalade"

    @Test("sign-up, a failed sign-in, a sign-in and a sign-out over HTTP are in `gatehouse audit tail --json` in order, from both services, with the client's address and agent and never a secret; export writes the same lines to a new 0600 file")
    func tailAndExport() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let agent = ["User-Agent": "AuditApp/2.1"]
        let up = try await stack.request("POST", "/v1/accounts", json: ["email": "audit@example.com", "password": password], headers: agent)
        #expect(up.status == 201)
        let id = try #require((up.json["user"] as? [String: Any])?["id"] as? String)
        let wrong = try await stack.request("POST", "/v1/sessions", json: ["email": "audit@example.com", "password": "wrong password here"], headers: agent)
        #expect(wrong.status == 401)
        let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": "audit@example.com", "password": password], headers: agent)
        #expect(signIn.status == 200)
        let session = try #require(signIn.json["session"] as? [String: Any])
        let access = try #require(session["accessToken"] as? String)
        let refresh = try #require(session["refreshToken"] as? String)
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: access).status == 204)
        // Someone else's failure, with an address that has no account.
        _ = try await stack.request("POST", "/v1/sessions", json: ["email": "ghost@example.com", "password": password])

        let tail = try await runAuditCommand(stack, ["tail", "--json", "--user", id])
        #expect(tail.status == 0, "\(tail.stderr)")
        let lines = jsonLines(tail.stdout)
        #expect(lines.map { $0["kind"] as? String } == ["sign_up", "sign_in.failed", "sign_in", "session.revoked"])
        #expect(lines.map { $0["source"] as? String } == ["identity", "identity", "identity", "token"])
        #expect(lines.allSatisfy { $0["userId"] as? String == id })
        #expect(lines[1]["reason"] as? String == "invalid_credentials")
        #expect(lines[3]["reason"] as? String == "sign_out" && lines[3]["sessionId"] as? String != nil)
        for line in lines.prefix(3) {
            #expect(line["ip"] as? String == "127.0.0.1")
            #expect(line["userAgent"] as? String == "AuditApp/2.1")
            #expect(line["actor"] as? String == "user")
        }
        for secret in [password, "wrong password here", access, refresh] { #expect(!tail.stdout.contains(secret)) }

        // Without --user: the unknown address's failure too, as readable lines.
        let text = try await runAuditCommand(stack, ["tail"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.split(separator: "\n").count == 5)
        #expect(text.stdout.contains("sign_in.failed  actor=user  reason=invalid_credentials  email=ghost@example.com"), "\(text.stdout)")

        let file = stack.dataDir.appendingPathComponent("audit.jsonl")
        let export = try await runAuditCommand(stack, ["export", file.path])
        #expect(export.status == 0, "\(export.stderr)")
        #expect(export.stdout == "exported 5 audit events to \(file.path)\n")
        let exported = try String(contentsOf: file, encoding: .utf8)
        #expect(jsonLines(exported).count == 5)
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // An existing file is never overwritten.
        let again = try await runAuditCommand(stack, ["export", file.path])
        #expect(again.status == 1 && again.stderr.contains("must not exist"), "\(again.stderr)")
        // A bad --since is refused before any call.
        let bad = try await runAuditCommand(stack, ["tail", "--since", "yesterday"])
        #expect(bad.status != 0 && bad.stderr.contains("--since"), "\(bad.stderr)")
    }

    @Test("tail --follow prints new events as they are committed, an admin key's action and the revocations it caused among them")
    func follow() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let u = try await signUpUser(stack, "follow@example.com")
        try FileManager.default.createDirectory(at: stack.dataDir, withIntermediateDirectories: true)
        let out = stack.dataDir.appendingPathComponent("follow.out")
        let follower = try launchProcess(
            try gatehouseBinary(), ["audit", "tail", "--follow", "--json", "--user", u.id], environment: stack.environment, log: out)
        defer { follower.terminate() }
        func kinds() -> [String] {
            jsonLines((try? String(contentsOf: out, encoding: .utf8)) ?? "").compactMap { $0["kind"] as? String }
        }
        try await waitUntil("the sign-up is printed", timeout: .seconds(10), interval: .milliseconds(100)) { kinds() == ["sign_up"] }
        let disabled = try await runUsersCommand(stack, ["disable", u.id])
        #expect(disabled.status == 0, "\(disabled.stderr)")
        try await waitUntil("the disable and its revocation are printed", timeout: .seconds(10), interval: .milliseconds(100)) {
            kinds().count == 3
        }
        #expect(Set(kinds().suffix(2)) == ["user.disabled", "sessions.revoked"])
        let lines = jsonLines((try? String(contentsOf: out, encoding: .utf8)) ?? "")
        #expect((lines.first { $0["kind"] as? String == "user.disabled" }?["actor"] as? String)?.hasPrefix("admin_key:") == true)
        #expect(lines.first { $0["kind"] as? String == "sessions.revoked" }?["reason"] as? String == "user_disabled")
        #expect(follower.isRunning)
    }

    @Test("with CURVE links, the identity service's own key reads both logs; the gateway's key is refused")
    func curve() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let keys = try await stack.curveKeyEnvironments()
        for role in ["identity", "token", "gateway"] { try stack.start(role, environment: keys[role]!.merging(["GATEHOUSE_ALLOW_PLAINTEXT": "false"]) { $1 }) }
        try await stack.waitReady()
        let u = try await signUpUser(stack, "curve@example.com")
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: u.access).status == 204)
        let own = try await runAuditCommand(stack, ["tail", "--json", "--user", u.id], environment: keys["identity"]!.merging(["GATEHOUSE_ALLOW_PLAINTEXT": "false"]) { $1 })
        #expect(own.status == 0, "\(own.stderr)")
        #expect(jsonLines(own.stdout).map { $0["kind"] as? String } == ["sign_up", "session.revoked"])
        let gateway = try await runAuditCommand(stack, ["tail"], environment: keys["gateway"]!.merging(["GATEHOUSE_ALLOW_PLAINTEXT": "false"]) { $1 })
        #expect(gateway.status == 1)
        #expect(gateway.stderr.contains("another role's key"), "\(gateway.stderr)")
    }
}
