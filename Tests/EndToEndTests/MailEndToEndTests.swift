import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseTestSupport
import IdentityService
import Mail
import Testing

/// The outbox delivered by the identity process to the local mailbox (issue 19 E2), with the
/// rows written by the test into the identity database (no operation sends mail yet).
@Suite("Mail: outbox to the local mailbox, gatehouse mail, kill -9")
struct MailEndToEndTests {
    /// The stack's identity database, created and migrated (the data folder made 0700).
    static func identityStore(_ stack: Stack) async throws -> SQLiteUserStore {
        try FileManager.default.createDirectory(at: stack.dataDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let store = try await SQLiteUserStore.open(path: stack.dataDir.appendingPathComponent("identity.sqlite").path)
        try await store.migrate()
        return store
    }

    static func mail(_ n: Int, subject: String? = nil, html: String? = nil) -> MailMessage {
        MailMessage(
            kind: "test_notice", from: "Gatehouse <no-reply@example.com>", to: "user\(n)@example.com", subject: subject ?? "Notice \(n)",
            text: "Body of mail \(n).", html: html, date: Date())
    }

    /// The Message-ID of every file in the mailbox (one entry per file).
    static func mailboxMessageIDs(_ stack: Stack) -> [String] {
        let folder = stack.dataDir.appendingPathComponent("mailbox")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".eml") }
        return names.compactMap { name in
            guard let text = try? String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8) else { return nil }
            return text.components(separatedBy: "\r\n").first { $0.hasPrefix("Message-ID: ") }.map { String($0.dropFirst("Message-ID: ".count)) }
        }
    }

    static func runMail(_ stack: Stack, _ arguments: [String]) async throws -> ProcessResult {
        try await runProcess(try gatehouseBinary(), ["mail"] + arguments, environment: stack.environment)
    }

    @Test("three processes: queued mails land in the mailbox; gatehouse mail list|show print them; /metrics counts them")
    func mailboxAndCLI() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let store = try await Self.identityStore(stack)
        let mails = [
            Self.mail(1), Self.mail(2, subject: "パスワードの再設定", html: "<p>HTML body 2</p>"), Self.mail(3),
        ]
        for mail in mails { try await store.enqueueMail(mail, at: Date()) }
        let empty = try await Self.runMail(stack, ["list"])
        #expect(empty.status == 0 && empty.stdout.hasPrefix("no mail in "), "\(empty.stderr)")

        try await stack.startThreeRoles()
        try await waitUntil("three mails sent") { try await store.outboxCount(state: "sent") == 3 }
        #expect(Set(Self.mailboxMessageIDs(stack)) == Set(mails.map(\.messageID)))
        // The stored bodies are blank once sent.
        #expect(try await store.outboxEntries().allSatisfy { $0.message.text.isEmpty && $0.message.html == nil })

        let list = try await Self.runMail(stack, ["list"])
        #expect(list.status == 0, "\(list.stderr)")
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 3, "\(list.stdout)")
        for mail in mails {
            #expect(lines.contains { $0.contains(mail.to) && $0.contains(mail.subject) && $0.contains("test_notice") }, "\(list.stdout)")
        }

        let second = try await Self.runMail(stack, ["show", mails[1].messageID])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout.contains("Subject: パスワードの再設定"), "\(second.stdout)")
        #expect(second.stdout.contains("To: user2@example.com"))
        #expect(second.stdout.contains("Body of mail 2.") && second.stdout.contains("<p>HTML body 2</p>"))
        let byNumber = try await Self.runMail(stack, ["show", "1"])
        #expect(byNumber.status == 0 && byNumber.stdout.contains("Message-ID: <"), "\(byNumber.stderr)")
        let raw = try await Self.runMail(stack, ["show", "--raw", "last"])
        #expect(raw.status == 0 && raw.stdout.contains("Content-Transfer-Encoding: base64"), "\(raw.stderr)")
        let missing = try await Self.runMail(stack, ["show", "<nope@example.com>"])
        #expect(missing.status == 1 && missing.stderr.contains("no mail <nope@example.com>"), "\(missing.stderr)")

        try await waitUntil("/metrics showing the three mails") {
            let text = String(decoding: try await stack.request("GET", "/metrics").body, as: UTF8.self)
            return text.contains("gatehouse_mail_sent 3") && text.contains("gatehouse_mail_queued 0") && text.contains("gatehouse_mail_dead 0")
        }
    }

    @Test("serve: the worker runs in the embedded default, logs one info line per mail without its body, and stops with SIGTERM")
    func serve() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let store = try await Self.identityStore(stack)
        let mail = Self.mail(1)
        try await store.enqueueMail(mail, at: Date())
        try stack.start("serve", environment: ["GATEHOUSE_LOG_LEVEL": "info"], captureLog: true)
        try await waitUntil("the mail sent") { try await store.outboxCount(state: "sent") == 1 }
        #expect(Self.mailboxMessageIDs(stack) == [mail.messageID])
        let line = try await stack.waitForLogLine(of: "serve", containing: "mail test_notice to user1@example.com delivered to the local mailbox")
        #expect(line?.contains(mail.messageID) == true, "\(stack.log(of: "serve"))")
        #expect(try await stack.waitForLogLine(of: "serve", containing: "mail delivery started", "/mailbox") != nil)
        #expect(!stack.log(of: "serve").contains("Body of mail 1"))
        // A mail committed while it runs (from another process: found by the poll, within seconds).
        let second = Self.mail(2)
        try await store.enqueueMail(second, at: Date())
        try await waitUntil("the second mail sent") { try await store.outboxCount(state: "sent") == 2 }
        let process = try #require(stack.processes["serve"])
        await stack.kill("serve", signal: SIGTERM)
        #expect(process.terminationStatus == 0)
    }

    @Test("kill -9 of the identity process: every mail committed before or while it was down is delivered after restart, with its Message-ID")
    func killNine() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let store = try await Self.identityStore(stack)
        var mails = (1...100).map { Self.mail($0) }
        for mail in mails { try await store.enqueueMail(mail, at: Date()) }

        try stack.start("identity", captureLog: true)
        try await waitUntil("the first mail in the mailbox") { !Self.mailboxMessageIDs(stack).isEmpty }
        await stack.kill("identity", signal: SIGKILL)
        let queuedAtKill = try await store.outboxCount(state: "queued")
        // Committed while the process is down.
        let later = (101...120).map { Self.mail($0) }
        for mail in later { try await store.enqueueMail(mail, at: Date()) }
        mails += later

        try stack.start("identity", captureLog: true)
        try await waitUntil("every mail sent after the restart") { try await store.outboxCount(state: "sent") == mails.count }
        let delivered = Self.mailboxMessageIDs(stack)
        // Each mail at least once (a mail handed over just before the kill may be there twice), nothing else.
        #expect(Set(delivered) == Set(mails.map(\.messageID)), "queued at the kill: \(queuedAtKill)")
        #expect(delivered.count >= mails.count)
        #expect(try await store.outboxCount(state: "queued") == 0)
    }
}
