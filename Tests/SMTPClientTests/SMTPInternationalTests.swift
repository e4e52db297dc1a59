import Foundation
import GatehouseTestSupport
import Mail
import Testing

@testable import SMTPClient

/// Non-ASCII addresses (issue 19 part 2, F4): SMTPUTF8 when the relay offers it, else an IDNA
/// domain with an ASCII local part, else a permanent failure that says why.
@Suite("SMTP transport and non-ASCII addresses", .timeLimit(.minutes(1)))
struct SMTPInternationalTests {
    @Test("Punycode and IDNA: RFC 3492 encodings, NFC and lower case, the ideographic full stop, too long labels refused")
    func punycode() {
        #expect(Punycode.encode("bücher") == "bcher-kva")
        #expect(Punycode.encode("münchen") == "mnchen-3ya")
        #expect(Punycode.encode("日本語") == "wgv71a119e")
        #expect(Punycode.encode("ドメイン名例") == "eckwd4c7cu47r2wf")
        #expect(IDNA.asciiDomain("例え.テスト") == "xn--r8jz45g.xn--zckzah")
        #expect(IDNA.asciiDomain("例え。テスト") == "xn--r8jz45g.xn--zckzah")
        #expect(IDNA.asciiDomain("Bücher.Example") == "xn--bcher-kva.example")
        #expect(IDNA.asciiDomain("bu\u{0308}cher.de") == "xn--bcher-kva.de")
        #expect(IDNA.asciiDomain("example.com") == "example.com")
        #expect(IDNA.asciiDomain("ü..de") == nil)
        #expect(IDNA.asciiDomain(String(repeating: "ü", count: 80) + ".de") == nil)
    }

    @Test("a relay offering SMTPUTF8 gets the UTF-8 address with MAIL FROM … SMTPUTF8; an ASCII mail goes without it")
    func smtpUTF8() async throws {
        let harness = try await SMTPHarness.start(smtpUTF8: true)
        defer { harness.stop() }
        let message = SMTPTransportTests.mail(to: "ユーザー@例え.jp")
        try await SMTPTransportTests.transport(harness).deliver(message)
        try await SMTPTransportTests.transport(harness).deliver(SMTPTransportTests.mail())
        let received = try harness.messages()
        #expect(received.map(\.rcpt_tos) == [["ユーザー@例え.jp"], ["ada@example.com"]])
        #expect(received.first?.mail_options?.contains("SMTPUTF8") == true)
        #expect(received.last?.mail_options?.contains("SMTPUTF8") == false)
        #expect(received.first?.header("To") == "ユーザー@例え.jp")
        #expect(received.first?.decodedText == message.text)
    }

    @Test("a relay without SMTPUTF8 gets the domain in IDNA when the local part is ASCII, in the envelope and the To header")
    func idnaDomain() async throws {
        let harness = try await SMTPHarness.start()
        defer { harness.stop() }
        let message = SMTPTransportTests.mail(to: "ada@例え.テスト")
        try await SMTPTransportTests.transport(harness).deliver(message)
        let received = try harness.messages()
        #expect(received.map(\.rcpt_tos) == [["ada@xn--r8jz45g.xn--zckzah"]])
        #expect(received.first?.mail_options?.contains("SMTPUTF8") == false)
        #expect(received.first?.header("To") == "ada@xn--r8jz45g.xn--zckzah")
        #expect(received.first?.messageID == message.messageID)
    }

    @Test("a non-ASCII local part through a relay without SMTPUTF8: permanent, saying why, nothing sent")
    func nonASCIILocalPart() async throws {
        let harness = try await SMTPHarness.start()
        defer { harness.stop() }
        let error = await SMTPTransportTests.deliveryError {
            try await SMTPTransportTests.transport(harness).deliver(SMTPTransportTests.mail(to: "ユーザー@example.com"))
        }
        #expect(SMTPTransportTests.isPermanent(error, "non-ASCII local part"), "\(String(describing: error))")
        #expect(SMTPTransportTests.isPermanent(error, "does not offer SMTPUTF8"), "\(String(describing: error))")
        #expect(try harness.messages().isEmpty)
    }
}
