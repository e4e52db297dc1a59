import Foundation
import GatehouseTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A signed-out token stays dead: across `kill -9` and restarts of every role in every order,
/// and when the revocation is made while the token service restarts.
@Suite("Revocation over real processes")
struct RevocationEndToEndTests {
    /// One user's access tokens on `stack`: those signed out, and one still live.
    final class Tokens: @unchecked Sendable {
        let email = "revoke-\(UUID().uuidString.prefix(8))@example.com"
        var revoked: [String] = []
        var live: [String] = []
    }

    static let password = "correct horse battery"

    func signUp(_ stack: Stack, _ tokens: Tokens) async throws {
        let r = try await stack.request("POST", "/v1/accounts", json: ["email": tokens.email, "password": Self.password])
        #expect(r.status == 201, "\(String(decoding: r.body, as: UTF8.self))")
        tokens.live.append(try #require((r.json["session"] as? [String: Any])?["accessToken"] as? String))
    }

    func signIn(_ stack: Stack, _ tokens: Tokens, port: Int? = nil) async throws -> String {
        let r = try await stack.request("POST", "/v1/sessions", json: ["email": tokens.email, "password": Self.password], port: port)
        #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")
        return try #require((r.json["session"] as? [String: Any])?["accessToken"] as? String)
    }

    /// Signs a new session out; then signs out everywhere (every session of the user, the live
    /// one too), and signs in a fresh live session after it.
    func revokeSome(_ stack: Stack, _ tokens: Tokens) async throws {
        let out = try await signIn(stack, tokens)
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: out).status == 204)
        tokens.revoked.append(out)
        // Sign out everywhere: every session of the user, the live one included.
        let everywhere = try await signIn(stack, tokens)
        let other = try await signIn(stack, tokens)
        #expect(try await stack.request("DELETE", "/v1/sessions", bearer: everywhere).status == 204)
        tokens.revoked += [everywhere, other] + tokens.live
        tokens.live = [try await signIn(stack, tokens)]
    }

    /// Every revoked token is refused with 401 `session_revoked`, every live one is served.
    func expectRefused(_ stack: Stack, _ tokens: Tokens, port: Int? = nil, _ step: String) async throws {
        for (i, token) in tokens.revoked.enumerated() {
            let r = try await stack.request("GET", "/v1/me", bearer: token, port: port)
            #expect(r.status == 401 && r.json["code"] as? String == "session_revoked", "\(step): revoked token \(i) answered \(r.status) \(String(decoding: r.body, as: UTF8.self))")
        }
        for token in tokens.live {
            #expect(try await stack.request("GET", "/v1/me", bearer: token, port: port).status == 200, "\(step): the live token")
        }
    }

    @Test("three roles: revoked tokens stay refused after kill -9 of the gateway, the token service, or both, in every order")
    func separateRolesRestarted() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let tokens = Tokens()
        try await signUp(stack, tokens)

        let orders: [(String, [String], [String])] = [
            ("gateway", ["gateway"], ["gateway"]),
            ("token", ["token"], ["token"]),
            ("both, token back first", ["gateway", "token"], ["token", "gateway"]),
            ("both, gateway back first", ["token", "gateway"], ["gateway", "token"]),
        ]
        for (step, killed, restarted) in orders {
            // A revocation in each epoch of the token service, so every restart has new ones.
            try await revokeSome(stack, tokens)
            try await expectRefused(stack, tokens, "before restarting \(step)")
            for role in killed { await stack.kill(role) }
            for role in restarted { try stack.start(role) }
            try await stack.waitReady()
            try await expectRefused(stack, tokens, "after restarting \(step)")
        }
    }

    @Test("gatehouse serve: revoked tokens stay refused after kill -9 and a restart")
    func serveRestarted() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("serve")
        try await stack.waitReady()
        let tokens = Tokens()
        try await signUp(stack, tokens)
        for round in 1...2 {
            try await revokeSome(stack, tokens)
            await stack.kill("serve")
            try stack.start("serve")
            try await stack.waitReady()
            try await expectRefused(stack, tokens, "after restart \(round)")
        }
    }

    @Test("revoked while the token service restarts: refused at once by the gateway that acknowledged it, soon by the others")
    func revokedDuringATokenServiceRestart() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let secondPort = freeLoopbackPort()
        // The same issuer as the token service's (by default the public URL, which has the port in it).
        let secondGateway = ["GATEHOUSE_HTTP_PORT": "\(secondPort)", "GATEHOUSE_ISSUER": stack.baseURL]
        try stack.start("identity")
        try stack.start("token")
        try stack.start("gateway")
        try stack.start("gateway", name: "gateway-2", environment: secondGateway)
        try await stack.waitReady()
        try await stack.waitReady(port: secondPort)
        let tokens = Tokens()
        try await signUp(stack, tokens)
        let sessions = [tokens.live[0]] + [try await signIn(stack, tokens), try await signIn(stack, tokens), try await signIn(stack, tokens)]
        tokens.live = []
        // Both gateways have verified a token (and cached the token service's keys).
        for port in [stack.httpPort, secondPort] {
            let me = try await stack.request("GET", "/v1/me", bearer: sessions[0], port: port)
            #expect(me.status == 200, "port \(port): \(String(decoding: me.body, as: UTF8.self))")
        }

        await stack.kill("token")
        // Not acknowledged while the token service is down: nothing was revoked.
        let refused = try await stack.request("DELETE", "/v1/sessions/current", bearer: sessions[0])
        #expect(refused.status == 503, "\(String(decoding: refused.body, as: UTF8.self))")
        #expect(try await stack.request("GET", "/v1/me", bearer: sessions[0]).status == 200)

        // Sign out everywhere through the restart, until acknowledged.
        try stack.start("token")
        try await waitUntil("sign-out everywhere acknowledged", timeout: .seconds(60), interval: .milliseconds(50)) {
            try await stack.request("DELETE", "/v1/sessions", bearer: sessions[1]).status == 204
        }
        // Refused at once by the gateway that answered 204, events or not.
        tokens.revoked = sessions
        try await expectRefused(stack, tokens, "right after the acknowledgement")
        // The other gateway learns of it from the feed (an event, or the new epoch's heartbeat
        // and a reload of the state).
        try await waitUntil("the second gateway refusing every session", timeout: .seconds(30), interval: .milliseconds(100)) {
            for token in sessions where try await stack.request("GET", "/v1/me", bearer: token, port: secondPort).status != 401 { return false }
            return true
        }
        // And it survives a kill -9 of the token service and of the second gateway.
        await stack.kill("token")
        await stack.kill("gateway-2")
        try stack.start("gateway", name: "gateway-2", environment: secondGateway)
        try stack.start("token")
        try await stack.waitReady(port: secondPort)
        try await expectRefused(stack, tokens, port: secondPort, "after restarting the token service and the second gateway")
    }
}
