import Foundation
import GatehouseSupport
import GatehouseTestSupport
import Testing
import IdentityService
import SMTPClient
@testable import GatehouseApp

@Suite("Mail settings (GATEHOUSE_SMTP_*, GATEHOUSE_MAIL_MAX_ATTEMPTS)")
struct MailSettingsTests {
    func settings(_ environment: [String: String]) throws -> MailSettings {
        try MailSettings(config: Config(environment: environment))
    }

    func refused(_ environment: [String: String], naming key: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(sourceLocation: sourceLocation) {
            try settings(environment)
        } throws: { error in
            (error as? ConfigError)?.message.contains(key) == true
        }
    }

    @Test("defaults: no relay (the local mailbox of the data folder), 10 attempts")
    func defaults() throws {
        let mail = try settings([:])
        #expect(mail.smtp == nil)
        #expect(mail.maxAttempts == 10)
        let (_, destination) = try mail.makeTransport(dataDir: "/data", clock: .system) { _ in
            Issue.record("no relay is configured")
            throw ConfigError(message: "unexpected")
        }
        #expect(destination.contains("/data/mailbox"))
    }

    @Test("a relay: host, port, TLS mode, user and the password read from its file (trailing newline dropped), CA file")
    func relay() throws {
        let directory = try TemporaryDirectory(prefix: "mail-settings")
        defer { directory.remove() }
        let passwordFile = directory.path("smtp-password")
        try Data("s3cret pass\n".utf8).write(to: URL(fileURLWithPath: passwordFile))
        let caFile = directory.path("ca.pem")
        try Data("-----BEGIN CERTIFICATE-----\n".utf8).write(to: URL(fileURLWithPath: caFile))
        let mail = try settings([
            "GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_PORT": "465", "GATEHOUSE_SMTP_TLS": "implicit",
            "GATEHOUSE_SMTP_USERNAME": "mailer", "GATEHOUSE_SMTP_PASSWORD_FILE": passwordFile, "GATEHOUSE_SMTP_CA_FILE": caFile,
            "GATEHOUSE_MAIL_MAX_ATTEMPTS": "3",
        ])
        #expect(mail.smtp == SMTPSettings(host: "smtp.example.com", port: 465, tls: .implicit, username: "mailer", password: "s3cret pass", caFile: caFile))
        #expect(mail.maxAttempts == 3)
        #expect(try settings(["GATEHOUSE_SMTP_HOST": "relay.internal"]).smtp == SMTPSettings(
            host: "relay.internal", port: 587, tls: .startTLS, username: nil, password: nil, caFile: nil))
        // The seam: the relay's settings go to the SMTP client's factory.
        #expect {
            _ = try mail.makeTransport(dataDir: "/data", clock: .system) { smtp in
                #expect(smtp.host == "smtp.example.com" && smtp.port == 465)
                throw ConfigError(message: "the factory was called")
            }
        } throws: { error in
            (error as? ConfigError)?.message == "the factory was called"
        }
    }

    @Test("bad values stop start-up naming the key; the password never appears")
    func refusals() throws {
        let directory = try TemporaryDirectory(prefix: "mail-settings")
        defer { directory.remove() }
        let passwordFile = directory.path("smtp-password")
        try Data("hunter2-secret".utf8).write(to: URL(fileURLWithPath: passwordFile))
        let host = ["GATEHOUSE_SMTP_HOST": "smtp.example.com"]
        refused(host.merging(["GATEHOUSE_SMTP_TLS": "ssl"]) { $1 }, naming: "GATEHOUSE_SMTP_TLS")
        refused(host.merging(["GATEHOUSE_SMTP_PORT": "0"]) { $1 }, naming: "GATEHOUSE_SMTP_PORT")
        refused(host.merging(["GATEHOUSE_SMTP_USERNAME": "mailer"]) { $1 }, naming: "GATEHOUSE_SMTP_PASSWORD_FILE")
        refused(host.merging(["GATEHOUSE_SMTP_PASSWORD_FILE": directory.path("missing")]) { $1 }, naming: "GATEHOUSE_SMTP_PASSWORD_FILE")
        refused(host.merging(["GATEHOUSE_SMTP_CA_FILE": directory.path("missing.pem")]) { $1 }, naming: "GATEHOUSE_SMTP_CA_FILE")
        refused(["GATEHOUSE_MAIL_MAX_ATTEMPTS": "0"], naming: "GATEHOUSE_MAIL_MAX_ATTEMPTS")
        refused(["GATEHOUSE_MAIL_MAX_ATTEMPTS": "101"], naming: "GATEHOUSE_MAIL_MAX_ATTEMPTS")
        let plain = host.merging(["GATEHOUSE_SMTP_TLS": "none", "GATEHOUSE_SMTP_USERNAME": "mailer", "GATEHOUSE_SMTP_PASSWORD_FILE": passwordFile]) { $1 }
        do {
            _ = try settings(plain)
            Issue.record("credentials in plain text to a remote relay were accepted")
        } catch let error as ConfigError {
            #expect(error.message.contains("GATEHOUSE_SMTP_TLS") && !error.message.contains("hunter2"))
        }
        // A loopback relay may go without TLS.
        let local = try settings(plain.merging(["GATEHOUSE_SMTP_HOST": "127.0.0.1"]) { $1 })
        #expect(local.smtp?.tls == SMTPSettings.TLSMode.none && local.smtp?.password == "hunter2-secret")
    }

    @Test("a configured relay gets the SMTP client; without one, the local mailbox")
    func transports() throws {
        let relay = try settings(["GATEHOUSE_SMTP_HOST": "smtp.example.com"])
        let (transport, destination) = try relay.makeTransport(dataDir: "/data", clock: .system, smtp: MailSettings.smtpClient)
        #expect(transport is SMTPTransport)
        #expect(destination.contains("smtp.example.com:587"))
        let (local, _) = try settings([:]).makeTransport(dataDir: "/data", clock: .system, smtp: MailSettings.smtpClient)
        #expect(local is LocalMailbox)
    }
}
