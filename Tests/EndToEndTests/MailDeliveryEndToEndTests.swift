import Foundation
import GatehouseApp
import GatehouseTestSupport
import Testing

/// Delivery robustness over three processes and a real relay (issue 19 part 2, F4): a reset mail
/// whose code expired while the relay was down is never sent; international addresses.
@Suite("Mail delivery robustness, three processes")
struct MailDeliveryEndToEndTests {
    static func metrics(_ stack: Stack) async throws -> String {
        String(decoding: try await stack.request("GET", "/metrics").body, as: UTF8.self)
    }

    @Test("the relay down for longer than the reset code works: once it is back, the mail is dead (expired), never sent")
    func expiredWhileTheRelayWasDown() async throws {
        let port = freeLoopbackPort()
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: MailRelayEndToEndTests.relayEnvironment(port: port))
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        _ = try await signUpUser(stack, "late@example.com", password: MailRelayEndToEndTests.pw)
        #expect(try await stack.request("POST", "/v1/password-reset", json: ["email": "late@example.com"]).status == 202)
        try await waitUntil("a failed attempt", timeout: .seconds(15)) {
            try await Self.metrics(stack).contains("gatehouse_mail_retried 1")
        }
        let relay = try await SMTPHarness.start(port: port)
        defer { relay.stop() }
        // The code works 3600 s: past it, the next attempt finds the mail expired.
        stack.advanceClock(by: .seconds(3601))
        try await waitUntil("the mail marked dead", timeout: .seconds(15)) {
            try await Self.metrics(stack).contains("gatehouse_mail_dead 1")
        }
        #expect(try relay.messages().isEmpty)
        #expect(try await Self.metrics(stack).contains("gatehouse_mail_sent 0"))
    }

    @Test("an internationalized domain reaches a relay without SMTPUTF8 in IDNA form; a non-ASCII local part is dead at once")
    func internationalAddresses() async throws {
        let plain = try await SMTPHarness.start()
        defer { plain.stop() }
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: MailRelayEndToEndTests.relayEnvironment(port: plain.port))
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        _ = try await signUpUser(stack, "ada@例え.jp", password: MailRelayEndToEndTests.pw)
        _ = try await signUpUser(stack, "ユーザー@example.com", password: MailRelayEndToEndTests.pw)
        for email in ["ada@例え.jp", "ユーザー@example.com"] {
            #expect(try await stack.request("POST", "/v1/password-reset", json: ["email": email]).status == 202)
        }
        try await waitUntil("one mail sent and one dead", timeout: .seconds(15)) {
            let metrics = try await Self.metrics(stack)
            return metrics.contains("gatehouse_mail_sent 1") && metrics.contains("gatehouse_mail_dead 1")
        }
        let received = try plain.messages()
        #expect(received.map(\.rcpt_tos) == [["ada@xn--r8jz45g.jp"]])
        #expect(received.first?.header("To") == "ada@xn--r8jz45g.jp")
        #expect(received.first.flatMap(MailRelayEndToEndTests.code(in:)) != nil)
    }
}
