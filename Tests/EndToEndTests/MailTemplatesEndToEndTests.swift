import Foundation
import GatehouseApp
import GatehouseTestSupport
import Testing

/// Issue 19 §5 over three processes: the identity service reads the operator's templates from
/// `GATEHOUSE_MAIL_TEMPLATES`, the gateway passes `Accept-Language`, and the mail in the local
/// mailbox is the operator's; a bad template folder stops the identity service at start.
@Suite("Mail templates over three processes")
struct MailTemplatesEndToEndTests {
    @Test("an operator's zh template is chosen by Accept-Language, an override of en applies, other languages fall back")
    func operatorTemplates() async throws {
        let templates = try TemporaryDirectory()
        defer { templates.remove() }
        try Data("{{{appName}}} 密码重置".utf8).write(to: templates.file("password_reset.zh.subject.mustache"))
        try Data("代码:\n{{{code}}}\n链接: {{{link}}}\n".utf8).write(to: templates.file("password_reset.zh.text.mustache"))
        try Data("Your {{{appName}}} code".utf8).write(to: templates.file("password_reset.en.subject.mustache"))
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: ["GATEHOUSE_MAIL_TEMPLATES": templates.path, "GATEHOUSE_APP_NAME": "Sakura"])
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        for email in ["zh@example.com", "en@example.com", "fr@example.com"] {
            let created = try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": "correct horse battery"])
            #expect(created.status == 201)
        }
        func mail(to address: String) throws -> DeliveredMail? { try stack.deliveredMails().first { $0.to == address } }
        for (email, language) in [("zh@example.com", "zh-CN,zh;q=0.9"), ("en@example.com", "en-GB"), ("fr@example.com", "fr, ja;q=0.5")] {
            let asked = try await stack.request("POST", "/v1/password-reset", json: ["email": email], headers: ["Accept-Language": language])
            #expect(asked.status == 202)
            try await waitUntil("the reset mail to \(email) is delivered") { try mail(to: email) != nil }
        }
        let zh = try #require(try mail(to: "zh@example.com"))
        #expect(zh.subject == "Sakura 密码重置")
        let code = try #require(resetCode(in: zh.text))
        #expect(zh.text.contains("链接: \(stack.baseURL)/actions?mode=resetPassword&code=\(code)&lang=zh"))
        #expect(try #require(try mail(to: "en@example.com")).subject == "Your Sakura code")
        #expect(try #require(try mail(to: "fr@example.com")).subject == "Sakura のパスワード再設定")
    }

    @Test("a template that does not compile stops the identity service at start, naming the file")
    func badTemplate() async throws {
        let templates = try TemporaryDirectory()
        defer { templates.remove() }
        try Data("{{#link}} never closed".utf8).write(to: templates.file("verify_email.en.text.mustache"))
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: ["GATEHOUSE_MAIL_TEMPLATES": templates.path], captureLog: true)
        let line = try await stack.waitForLogLine(of: "identity", containing: "GATEHOUSE_MAIL_TEMPLATES", "verify_email.en.text.mustache")
        #expect(line?.contains("does not compile") == true)
        try await waitUntil("the identity process exits") { stack.processes["identity"]?.isRunning == false }
        #expect(stack.processes["identity"]?.terminationStatus != 0)
    }
}
