import Foundation
import GatehouseApp
import GatehouseTestSupport
import Testing

/// Mail leaving through a real SMTP relay (aiosmtpd on loopback): the password reset of A30 read
/// from the message the relay received, and a relay that is down for a while.
@Suite("Mail through a real SMTP relay, three processes")
struct MailRelayEndToEndTests {
    static let pw = "correct horse battery"

    /// The reset code in a mail the relay received (its text part, decoded as the mailbox reader does).
    static func code(in message: SMTPHarness.Received) -> String? {
        resetCode(in: MailboxReader.parse(message.data).text)
    }

    static func relayEnvironment(port: Int) -> [String: String] {
        ["GATEHOUSE_SMTP_HOST": "127.0.0.1", "GATEHOUSE_SMTP_PORT": String(port), "GATEHOUSE_SMTP_TLS": "none",
         "GATEHOUSE_MAIL_FROM": "Gatehouse <no-reply@example.com>"]
    }

    @Test("A30 through the relay: the reset mail arrives over SMTP, its code sets the new password and ends every session")
    func resetThroughTheRelay() async throws {
        let relay = try await SMTPHarness.start()
        defer { relay.stop() }
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: Self.relayEnvironment(port: relay.port))
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        let user = try await signUpUser(stack, "ada@example.com", password: Self.pw)
        #expect(try await stack.request("POST", "/v1/password-reset", json: ["email": "ada@example.com"]).status == 202)
        try await waitUntil("the reset mail at the relay", timeout: .seconds(15)) { try relay.messages().count == 1 }
        let message = try #require(try relay.messages().first)
        #expect(message.rcpt_tos == ["ada@example.com"] && message.mail_from == "no-reply@example.com")
        #expect(message.header("X-Gatehouse-Kind") == "password_reset")
        let code = try #require(Self.code(in: message))
        let confirmed = try await stack.request("POST", "/v1/password-reset/confirm", json: ["code": code, "password": "saffron kettle obelisk"])
        #expect(confirmed.status == 204)
        #expect(try await stack.request("GET", "/v1/me", bearer: user.access).status == 401)
        #expect(try await stack.request("POST", "/v1/sessions", json: ["email": "ada@example.com", "password": "saffron kettle obelisk"]).status == 200)
        // An unknown address: the same answer, and nothing more reaches the relay.
        #expect(try await stack.request("POST", "/v1/password-reset", json: ["email": "nobody@example.com"]).status == 202)
        let metrics = String(decoding: try await stack.request("GET", "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("gatehouse_mail_sent 1"), "\(metrics.split(separator: "\n").filter { $0.contains("mail") })")
        // The delivery time histogram counted in the identity process, shown by the gateway's.
        #expect(metrics.contains("gatehouse_mail_delivery_seconds_bucket{le=\"+Inf\"} 1\n"))
        #expect(metrics.contains("gatehouse_mail_delivery_seconds_count 1\n"))
        #expect(try relay.messages().count == 1)
    }

    @Test("the relay down for a while: the mail waits in the outbox, retried with backoff, and arrives once the relay is back")
    func relayDownThenBack() async throws {
        let port = freeLoopbackPort()
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: Self.relayEnvironment(port: port))
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        _ = try await signUpUser(stack, "bo@example.com", password: Self.pw)
        #expect(try await stack.request("POST", "/v1/password-reset", json: ["email": "bo@example.com"]).status == 202)
        // The first attempt fails (nothing listens): counted as a retry, still queued.
        try await waitUntil("a failed attempt", timeout: .seconds(15)) {
            let metrics = String(decoding: try await stack.request("GET", "/metrics").body, as: UTF8.self)
            return metrics.contains("gatehouse_mail_retried 1") && metrics.contains("gatehouse_mail_queued 1")
        }
        let relay = try await SMTPHarness.start(port: port)
        defer { relay.stop() }
        // The next attempt is due 30 s (less jitter) later: move the clock instead of waiting.
        stack.advanceClock(by: .seconds(31))
        try await waitUntil("the mail at the relay once it is back", timeout: .seconds(15)) { try relay.messages().count == 1 }
        #expect(try relay.messages().first?.rcpt_tos == ["bo@example.com"])
    }

    @Test("verification and email change through the relay: each code is read from the message the relay received (sign-up mail under send, the change to the new address, the notice to the old one)")
    func verifyAndChangeThroughTheRelay() async throws {
        let relay = try await SMTPHarness.start()
        defer { relay.stop() }
        let stack = Stack()
        defer { stack.stopAll() }
        var environment = Self.relayEnvironment(port: relay.port)
        environment["GATEHOUSE_EMAIL_VERIFICATION"] = "send"
        try stack.start("identity", environment: environment)
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        func message(_ kind: String, to address: String) async throws -> SMTPHarness.Received {
            try await waitUntil("a \(kind) message to \(address) at the relay", timeout: .seconds(15)) {
                try relay.messages().contains { $0.header("X-Gatehouse-Kind") == kind && $0.rcpt_tos == [address] }
            }
            return try #require(try relay.messages().last { $0.header("X-Gatehouse-Kind") == kind && $0.rcpt_tos == [address] })
        }
        let user = try await signUpUser(stack, "cy@example.com", password: Self.pw)

        // Verification: mailed at sign-up (send), confirmed with the relayed code.
        let verify = try #require(Self.code(in: try await message("verify_email", to: "cy@example.com")))
        #expect(try await stack.request("POST", "/v1/email-verification/confirm", json: ["code": verify]).status == 204)
        #expect(try await stack.request("GET", "/v1/me", bearer: user.access).json["emailVerified"] as? Bool == true)

        // Email change: the code goes to the new address; confirming sends the notice to the old one.
        #expect(try await stack.request("PUT", "/v1/me/email", json: ["email": "cy.new@example.com"], bearer: user.access).status == 202)
        let change = try #require(Self.code(in: try await message("change_email", to: "cy.new@example.com")))
        #expect(try await stack.request("POST", "/v1/email-change/confirm", json: ["code": change]).status == 204)
        #expect(try await stack.request("GET", "/v1/me", bearer: user.access).json["email"] as? String == "cy.new@example.com")
        let notice = try await message("email_changed", to: "cy@example.com")
        let revert = try #require(Self.code(in: notice))
        #expect(try await stack.request("POST", "/v1/email-change/revert", json: ["code": revert]).status == 204)
        #expect(try await stack.request("GET", "/v1/me", bearer: user.access).status == 401)
        // The revert's password reset mail reaches the relay too.
        _ = try await message("password_reset", to: "cy@example.com")
    }
}
