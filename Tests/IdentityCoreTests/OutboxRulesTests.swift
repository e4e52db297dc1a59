import Foundation
import IdentityCore
import Mail
import Testing

/// What an outbox row records after a delivery attempt: no store, no clock.
@Suite("Outbox rules")
struct OutboxRulesTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)
    static let mail = MailMessage(
        messageID: "<m1@gatehouse>", kind: "password_reset", from: "auth@example.com", to: "ada@example.com", subject: "Reset",
        text: "code 123", html: "<p>code 123</p>", date: now)

    @Test("sent: bodies blanked, headers kept, no error, sent now")
    func sent() {
        let a = OutboxRules.sent(id: 7, message: Self.mail, attempts: 2, at: Self.now)
        #expect(a == OutboxAttempt(id: 7, state: .sent, attempts: 2, sentAt: Self.now, message: OutboxRules.blanked(Self.mail)))
        #expect(a.message?.text == "" && a.message?.html == nil)
        #expect(a.message?.messageID == Self.mail.messageID && a.message?.to == Self.mail.to && a.message?.subject == Self.mail.subject)
    }

    struct FailCase: Sendable, CustomTestStringConvertible {
        var name: String
        var error: String
        var next: Date?
        var known: Bool
        var state: OutboxAttempt.State
        var reason: String
        var blanked: Bool
        var testDescription: String { name }
    }

    static let failCases: [FailCase] = [
        .init(name: "a retry: queued, message kept", error: "451 later", next: now.addingTimeInterval(60), known: true, state: .queued, reason: "451 later", blanked: false),
        .init(name: "no more attempts: dead, bodies blanked", error: "550 no", next: nil, known: true, state: .dead, reason: "550 no", blanked: true),
        .init(name: "undecodable: dead, stored message left", error: "bad", next: nil, known: false, state: .dead, reason: "bad", blanked: false),
        .init(name: "NUL removed", error: "a\u{0}b", next: nil, known: true, state: .dead, reason: "ab", blanked: true),
        .init(
            name: "cut to 500 characters", error: String(repeating: "é", count: 600), next: now, known: true, state: .queued,
            reason: String(repeating: "é", count: 500), blanked: false),
    ]

    @Test("failed", arguments: failCases)
    func failed(_ c: FailCase) {
        let a = OutboxRules.failed(id: 3, message: c.known ? Self.mail : nil, attempts: 4, error: c.error, nextAttemptAt: c.next)
        #expect(a.state == c.state)
        #expect(a.attempts == 4 && a.id == 3)
        #expect(a.lastError == c.reason)
        #expect(a.nextAttemptAt == (c.state == .queued ? c.next : nil))
        #expect(a.sentAt == nil)
        #expect(a.message == (c.blanked ? OutboxRules.blanked(Self.mail) : nil))
    }
}
