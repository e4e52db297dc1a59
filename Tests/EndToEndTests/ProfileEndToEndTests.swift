import Foundation
import GatehouseTestSupport
import Testing

@Suite("Profile and default settings over three processes")
struct ProfileEndToEndTests {
    @Test("A4: with GATEHOUSE_DEFAULT_SETTINGS, sign-up answers 201 with tokens and the defaults, and no password hash")
    func defaultsAtSignUp() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let defaults = #"{"biometric_enabled": false, "auto_backup": false, "theme": "dark"}"#
        try stack.start("identity", environment: ["GATEHOUSE_DEFAULT_SETTINGS": defaults])
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        let created = try await signUpUser(stack, "seed001@example.com")
        let user = try #require(created.body["user"] as? [String: Any])
        let settings = try #require(user["settings"] as? [String: Any])
        #expect(settings["biometric_enabled"] as? Bool == false)
        #expect(settings["auto_backup"] as? Bool == false)
        #expect(settings["theme"] as? String == "dark")
        #expect(settings.count == 3)
        #expect(!created.access.isEmpty && !created.refresh.isEmpty)
        #expect(user.keys.allSatisfy { !$0.lowercased().contains("password") })
        // Anonymous users start with them too.
        let anonymous = try await stack.request("POST", "/v1/accounts/anonymous")
        #expect(((anonymous.json["user"] as? [String: Any])?["settings"] as? [String: Any])?["theme"] as? String == "dark")
    }

    @Test("an invalid GATEHOUSE_DEFAULT_SETTINGS stops the identity role with a message naming the key")
    func invalidDefaults() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        var environment = stack.environment
        environment["GATEHOUSE_DEFAULT_SETTINGS"] = "[1,2]"
        let result = try await runProcess(try gatehouseBinary(), ["identity"], environment: environment)
        #expect(result.status != 0)
        #expect(result.stderr.contains("GATEHOUSE_DEFAULT_SETTINGS"), "\(result.stderr)")
    }

    @Test("A8: sign-up with a display name, /me shows it; PATCH displayName; PATCH settings merges and keeps other members")
    func profile() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: ["GATEHOUSE_DEFAULT_SETTINGS": #"{"biometric_enabled":false,"auto_backup":false,"theme":"dark"}"#])
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        let u = try await signUpUser(stack, "a8@example.com", extra: ["displayName": "Ada"])
        #expect(try await stack.request("GET", "/v1/me", bearer: u.access).json["displayName"] as? String == "Ada")
        let renamed = try await stack.request("PATCH", "/v1/me", json: ["displayName": "Ada L."], bearer: u.access)
        #expect(renamed.status == 200)
        #expect(try await stack.request("GET", "/v1/me", bearer: u.access).json["displayName"] as? String == "Ada L.")
        let patched = try await stack.request(
            "PATCH", "/v1/me", rawBody: Data(#"{"settings":{"theme":"light","auto_backup":null,"sync":{"wifi_only":true}}}"#.utf8),
            headers: ["Content-Type": "application/json"], bearer: u.access)
        #expect(patched.status == 200, "\(String(decoding: patched.body, as: UTF8.self))")
        let me = try await stack.request("GET", "/v1/me", bearer: u.access)
        let settings = try #require(me.json["settings"] as? [String: Any])
        #expect(settings["theme"] as? String == "light")
        #expect(settings["biometric_enabled"] as? Bool == false)
        #expect(settings["auto_backup"] == nil)
        #expect((settings["sync"] as? [String: Any])?["wifi_only"] as? Bool == true)
        #expect(me.json["displayName"] as? String == "Ada L.")
        // Over the limit: 422 naming settings, nothing written.
        let big = try await stack.request(
            "PATCH", "/v1/me", json: ["settings": ["blob": String(repeating: "x", count: 17_000)]], bearer: u.access)
        #expect(big.status == 422)
        #expect((big.json["detail"] as? String ?? "").contains("settings"))
        let after = try await stack.request("GET", "/v1/me", bearer: u.access)
        #expect((after.json["settings"] as? [String: Any])?["blob"] == nil)
    }
}
