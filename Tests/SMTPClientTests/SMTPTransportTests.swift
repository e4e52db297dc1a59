import Foundation
import GatehouseTestSupport
import Logging
import Mail
import Synchronization
import Testing

@testable import SMTPClient

/// `SMTPTransport` against a real SMTP server (aiosmtpd) on loopback: each test starts its own
/// server on a free port with its own folder, so the suite runs in parallel with the others.
@Suite("SMTP transport against aiosmtpd", .timeLimit(.minutes(1)))
struct SMTPTransportTests {
    static let password = "s3cret-Passw0rd"

    static func mail(to: String = "ada@example.com", text: String = "Your code: 123456\nIt expires in 60 minutes.\n") -> MailMessage {
        MailMessage(
            kind: "password_reset", from: "Gatehouse <no-reply@example.com>", to: to, subject: "Reset your password", text: text,
            date: Date(timeIntervalSince1970: 1_764_000_000), domain: "gatehouse.test")
    }

    static func transport(
        _ harness: SMTPHarness?, port: Int? = nil, host: String = "127.0.0.1", tls: SMTPConfiguration.TLSMode = .none,
        trusted: Bool = true, username: String? = nil, password: String? = nil, commandTimeout: Duration = .seconds(10)
    ) -> SMTPTransport {
        SMTPTransport(
            configuration: SMTPConfiguration(
                host: host, port: port ?? harness?.port ?? 25, tls: tls, caFile: trusted && tls != .none ? harness?.caFile : nil,
                username: username, password: password, heloName: "client.gatehouse.test", connectTimeout: .seconds(5),
                commandTimeout: commandTimeout))
    }

    /// Runs `body` and returns the `MailDeliveryError` it threw (failing the test if it threw nothing or something else).
    static func deliveryError(_ body: () async throws -> Void) async -> MailDeliveryError? {
        do {
            try await body()
            Issue.record("the delivery succeeded")
        } catch let error as MailDeliveryError {
            #expect(!error.description.contains(password), "the password leaked into the error")
            #expect(!error.description.contains("123456"), "the mail's content leaked into the error")
            return error
        } catch {
            Issue.record("not a MailDeliveryError: \(error)")
        }
        return nil
    }

    static func isTransient(_ error: MailDeliveryError?, _ containing: String) -> Bool {
        if case .transient(let reason) = error { return reason.contains(containing) }
        return false
    }

    static func isPermanent(_ error: MailDeliveryError?, _ containing: String) -> Bool {
        if case .permanent(let reason) = error { return reason.contains(containing) }
        return false
    }

    /// The one message the server received: its envelope, exact Message-ID and decoded body.
    static func expectDelivered(_ message: MailMessage, to harness: SMTPHarness, tls: Bool, mechanism: String? = nil) throws {
        let received = try harness.messages()
        #expect(received.count == 1)
        guard let mail = received.first else { return }
        #expect(mail.mail_from == "no-reply@example.com")
        #expect(mail.rcpt_tos == [message.to])
        #expect(mail.messageID == message.messageID)
        #expect(mail.header("Subject") == message.subject)
        #expect(mail.decodedText == message.text)
        #expect(mail.tls == tls)
        #expect(mail.auth_mechanism == mechanism)
    }

    @Test("plain text: the mail arrives with its Message-ID and body")
    func plainDelivery() async throws {
        let harness = try await SMTPHarness.start()
        defer { harness.stop() }
        let message = Self.mail()
        try await Self.transport(harness).deliver(message)
        try Self.expectDelivered(message, to: harness, tls: false)
    }

    @Test("STARTTLS to a host name the certificate names, with AUTH PLAIN")
    func startTLSWithAuthPlain() async throws {
        let harness = try await SMTPHarness.start(tls: "starttls", auth: "mailer:\(Self.password)")
        defer { harness.stop() }
        let message = Self.mail()
        try await Self.transport(harness, host: "localhost", tls: .startTLS, username: "mailer", password: Self.password).deliver(message)
        try Self.expectDelivered(message, to: harness, tls: true, mechanism: "PLAIN")
    }

    @Test("implicit TLS to an IP address the certificate names, with AUTH LOGIN when PLAIN is not offered")
    func implicitTLSWithAuthLogin() async throws {
        let harness = try await SMTPHarness.start(tls: "implicit", auth: "mailer:\(Self.password)", mechanisms: "LOGIN")
        defer { harness.stop() }
        let message = Self.mail(text: "こんにちは\r\n.a line with a dot\n")
        try await Self.transport(harness, tls: .implicit, username: "mailer", password: Self.password).deliver(message)
        try Self.expectDelivered(message, to: harness, tls: true, mechanism: "LOGIN")
    }

    @Test("a wrong password is refused by the relay: transient (the operator fixes the settings; queued mail waits), nothing delivered")
    func wrongPassword() async throws {
        let harness = try await SMTPHarness.start(tls: "starttls", auth: "mailer:right-password")
        defer { harness.stop() }
        let error = await Self.deliveryError {
            try await Self.transport(harness, tls: .startTLS, username: "mailer", password: Self.password).deliver(Self.mail())
        }
        #expect(Self.isTransient(error, "AUTH PLAIN"), "\(String(describing: error))")
        #expect(Self.isTransient(error, "535"), "\(String(describing: error))")
        #expect(Self.isTransient(error, "check the relay settings"), "\(String(describing: error))")
        #expect(try harness.messages().isEmpty)
    }

    @Test("a relay that offers AUTH only under TLS gets no credentials over plain text")
    func noAuthOverPlainText() async throws {
        let harness = try await SMTPHarness.start(auth: "mailer:\(Self.password)")
        defer { harness.stop() }
        let error = await Self.deliveryError {
            try await Self.transport(harness, username: "mailer", password: Self.password).deliver(Self.mail())
        }
        #expect(Self.isPermanent(error, "offers neither AUTH PLAIN nor AUTH LOGIN"), "\(String(describing: error))")
        #expect(try harness.messages().isEmpty)
    }

    @Test("credentials are never sent in plain text to a host that is not loopback")
    func noPlainTextCredentialsToRemoteHosts() async throws {
        let error = await Self.deliveryError {
            try await Self.transport(nil, port: 2525, host: "192.0.2.1", username: "mailer", password: Self.password).deliver(Self.mail())
        }
        #expect(Self.isTransient(error, "refusing to send SMTP credentials without TLS"), "\(String(describing: error))")
        #expect(SMTPConfiguration(host: "127.0.0.2").hostIsLoopback)
        #expect(SMTPConfiguration(host: "localhost").hostIsLoopback)
        #expect(SMTPConfiguration(host: "::1").hostIsLoopback)
        #expect(!SMTPConfiguration(host: "127.example.com").hostIsLoopback)
        #expect(!SMTPConfiguration(host: "10.0.0.1").hostIsLoopback)
    }

    @Test("a certificate from a CA the client does not trust is refused: transient, nothing delivered", arguments: ["starttls", "implicit"])
    func untrustedCertificate(mode: String) async throws {
        let harness = try await SMTPHarness.start(tls: mode)
        defer { harness.stop() }
        let error = await Self.deliveryError {
            try await Self.transport(harness, tls: mode == "starttls" ? .startTLS : .implicit, trusted: false).deliver(Self.mail())
        }
        #expect(Self.isTransient(error, "TLS with 127.0.0.1"), "\(String(describing: error))")
        #expect(try harness.messages().isEmpty)
    }

    @Test("a trusted certificate for another host name is refused: transient, nothing delivered")
    func certificateForAnotherHost() async throws {
        let harness = try await SMTPHarness.start(tls: "implicit", certificateNames: ["mail.example.test"])
        defer { harness.stop() }
        for host in ["127.0.0.1", "localhost"] {
            let error = await Self.deliveryError { try await Self.transport(harness, host: host, tls: .implicit).deliver(Self.mail()) }
            #expect(Self.isTransient(error, "TLS with \(host)"), "\(String(describing: error))")
        }
        #expect(try harness.messages().isEmpty)
    }

    @Test("STARTTLS required but not offered: transient, nothing sent in plain text")
    func startTLSNotOffered() async throws {
        let harness = try await SMTPHarness.start()
        defer { harness.stop() }
        let error = await Self.deliveryError { try await Self.transport(harness, tls: .startTLS, trusted: false).deliver(Self.mail()) }
        #expect(Self.isTransient(error, "does not offer STARTTLS"), "\(String(describing: error))")
        #expect(try harness.messages().isEmpty)
    }

    @Test("no server listening: transient")
    func serverDown() async throws {
        let error = await Self.deliveryError { try await Self.transport(nil, port: freeLoopbackPort()).deliver(Self.mail()) }
        #expect(Self.isTransient(error, "could not connect to 127.0.0.1"), "\(String(describing: error))")
    }

    @Test("a server slower than the command timeout: transient, well within the test's time")
    func slowServer() async throws {
        let harness = try await SMTPHarness.start(slow: 60)
        defer { harness.stop() }
        let started = ContinuousClock.now
        let error = await Self.deliveryError {
            try await Self.transport(harness, commandTimeout: .milliseconds(500)).deliver(Self.mail())
        }
        #expect(Self.isTransient(error, "did not answer the end of the message data within"), "\(String(describing: error))")
        #expect(ContinuousClock.now - started < .seconds(20))
    }

    @Test("a recipient refused with 550 is permanent; one deferred with 451 is transient")
    func refusedAndDeferredRecipients() async throws {
        let harness = try await SMTPHarness.start()
        defer { harness.stop() }
        let refused = await Self.deliveryError { try await Self.transport(harness).deliver(Self.mail(to: "reject550@example.com")) }
        #expect(Self.isPermanent(refused, "refused RCPT TO: 550"), "\(String(describing: refused))")
        let deferred = await Self.deliveryError { try await Self.transport(harness).deliver(Self.mail(to: "defer451@example.com")) }
        #expect(Self.isTransient(deferred, "deferred RCPT TO: 451"), "\(String(describing: deferred))")
        #expect(try harness.messages().isEmpty)
    }

    @Test("lines starting with a dot arrive intact (dot-stuffing), bare LFs as CRLF")
    func dotStuffing() async throws {
        let harness = try await SMTPHarness.start()
        defer { harness.stop() }
        let data = "Subject: dots\r\n\r\n.hidden\r\n..two\r\n.\r\nlast line\nno final break"
        try await Self.transport(harness).send(data, from: "a@example.com", to: ["b@example.com"], messageID: "<dots@test>")
        let received = try harness.messages()
        #expect(received.map(\.data) == ["Subject: dots\r\n\r\n.hidden\r\n..two\r\n.\r\nlast line\r\nno final break\r\n"])
    }

    @Test("a mail with a header injection is refused before connecting: permanent")
    func malformedMail() async throws {
        let error = await Self.deliveryError {
            try await Self.transport(nil, port: freeLoopbackPort()).deliver(Self.mail(to: "ada@example.com\r\nBcc: eve@example.com"))
        }
        #expect(Self.isPermanent(error, "the mail cannot be sent"), "\(String(describing: error))")
    }
}

@Suite("SMTP replies and data")
struct SMTPReplyTests {
    @Test("multi-line replies are joined; a code that changes mid-reply or a line that is not a reply is refused")
    func parser() throws {
        var parser = SMTPReplyParser()
        #expect(try parser.feed("250-harness.test") == nil)
        #expect(try parser.feed("250-STARTTLS") == nil)
        #expect(try parser.feed("250-auth=login") == nil)
        let reply = try #require(try parser.feed("250 AUTH LOGIN PLAIN"))
        #expect(reply.code == 250)
        #expect(reply.extensions == ["STARTTLS", "AUTH=LOGIN", "AUTH LOGIN PLAIN"])
        #expect(reply.authMechanisms == ["LOGIN", "PLAIN"])
        #expect(try parser.feed("221") == SMTPReply(code: 221, lines: [""]))
        _ = try parser.feed("250-first")
        #expect(throws: SMTPFailure.self) { try parser.feed("251 second") }
        var other = SMTPReplyParser()
        #expect(throws: SMTPFailure.self) { try other.feed("hello") }
        #expect(throws: SMTPFailure.self) { try other.feed("25x ok") }
        #expect(SMTPReply(code: 550, lines: ["no\r\nsuch user"]).summary == "550 no  such user")
    }

    @Test("dot-stuffing doubles a leading dot, ends every line with CRLF and adds the final dot line")
    func stuffing() {
        #expect(String(decoding: SMTPData.stuffed(".a\r\nb\n.\rc"), as: UTF8.self) == "..a\r\nb\r\n..\r\nc\r\n.\r\n")
        #expect(String(decoding: SMTPData.stuffed("x\r\n"), as: UTF8.self) == "x\r\n.\r\n")
        #expect(String(decoding: SMTPData.stuffed(""), as: UTF8.self) == ".\r\n")
    }
}

/// Keeps every log line (message and metadata) at every level.
final class RecordedLog: LogHandler, @unchecked Sendable {
    private let lines = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let line = "\(event.level) \(event.message) \(event.metadata ?? [:])"
        lines.withLock { $0.append(line) }
    }

    var all: [String] { lines.withLock { $0 } }
}

@Suite("SMTP transport logs", .timeLimit(.minutes(1)))
struct SMTPTransportLogTests {
    @Test("at trace level, neither the password (plain or base64) nor the mail's content is logged, delivered or refused")
    func noSecretsInLogs() async throws {
        let harness = try await SMTPHarness.start(tls: "starttls", auth: "mailer:\(SMTPTransportTests.password)")
        defer { harness.stop() }
        let log = RecordedLog()
        for password in [SMTPTransportTests.password, "wrong-\(SMTPTransportTests.password)"] {
            let transport = SMTPTransport(
                configuration: SMTPConfiguration(
                    host: "localhost", port: harness.port, tls: .startTLS, caFile: harness.caFile, username: "mailer", password: password),
                logger: Logger(label: "test") { _ in log })
            _ = try? await transport.deliver(SMTPTransportTests.mail())
        }
        #expect(try harness.messages().count == 1)
        #expect(!log.all.isEmpty)
        let secrets = [
            SMTPTransportTests.password, Data(SMTPTransportTests.password.utf8).base64EncodedString(),
            Data(([0] + Array("mailer".utf8) + [0] + Array(SMTPTransportTests.password.utf8))).base64EncodedString(), "123456",
        ]
        for line in log.all {
            #expect(!secrets.contains { line.contains($0) }, "\(line)")
        }
    }
}
