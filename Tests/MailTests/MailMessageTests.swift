import Foundation
import Mail
import Testing

@Suite struct MailMessageTests {
    static let date = Date(timeIntervalSince1970: 1_764_000_000)

    @Test("the rendered message has CRLF lines, a stable Message-ID, base64 bodies and encoded non-ASCII headers")
    func rendering() throws {
        let message = MailMessage(
            messageID: "<abc.def@example.com>", kind: "password_reset", from: "ゲートハウス <no-reply@example.com>", to: "ada@example.com",
            subject: "パスワードの再設定", text: "Your code: 123456\n.\n", html: "<p>Your code: <b>123456</b></p>", date: Self.date)
        #expect(message.problem == nil)
        let text = message.rendered()
        #expect(text.contains("Message-ID: <abc.def@example.com>\r\n"))
        #expect(text.contains("Date: Mon, 24 Nov 2025 16:00:00 +0000\r\n"))
        #expect(text.contains("Subject: =?utf-8?B?"))
        #expect(text.contains("From: =?utf-8?B?"))
        #expect(text.contains(" <no-reply@example.com>\r\n"))
        #expect(text.contains("Content-Type: multipart/alternative; boundary="))
        #expect(!text.replacingOccurrences(of: "\r\n", with: "").contains("\n"))
        #expect(text.components(separatedBy: "\r\n").allSatisfy { $0.count <= 998 && !$0.hasPrefix(".") })
        let body = text.components(separatedBy: "\r\n").first { $0.hasPrefix("WW91ciBjb2RlOiAxMjM0NTYK") }
        #expect(body != nil)
        #expect(message.fromAddress == "no-reply@example.com")
    }

    @Test("header injection and malformed addresses are refused")
    func problems() {
        func mail(to: String = "a@example.com", subject: String = "Hi") -> MailMessage {
            MailMessage(kind: "k", from: "x@example.com", to: to, subject: subject, text: "", date: Self.date)
        }
        #expect(mail(subject: "Hi\r\nBcc: eve@example.com").problem != nil)
        #expect(mail(to: "a@example.com\r\nBcc: eve@example.com").problem != nil)
        #expect(mail(to: "not-an-address").problem != nil)
        #expect(mail().problem == nil)
        #expect(mail().messageID.hasPrefix("<") && mail().messageID != mail().messageID)
    }
}
