import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseSupport
import GatehouseTestSupport
import IdentityService
import Mail
@testable import SMTPClient
import Testing
@testable import GatehouseApp

/// Delivery robustness settings (issue 19 part 2, F4): GATEHOUSE_MAIL_DELIVERY_TIMEOUT, the one
/// loopback check, and the worker's deadline against a real tarpitting relay.
@Suite("Mail delivery settings and deadline", .timeLimit(.minutes(1)))
struct MailDeliverySettingsTests {
    @Test("GATEHOUSE_MAIL_DELIVERY_TIMEOUT: 60 s by default, 5–600 accepted, anything else names the key")
    func deliveryTimeout() throws {
        #expect(try MailSettings(config: Config(environment: [:])).deliveryTimeout == 60)
        #expect(try MailSettings(config: Config(environment: ["GATEHOUSE_MAIL_DELIVERY_TIMEOUT": "5"])).deliveryTimeout == 5)
        for bad in ["4", "601", "soon"] {
            #expect {
                try MailSettings(config: Config(environment: ["GATEHOUSE_MAIL_DELIVERY_TIMEOUT": bad]))
            } throws: { error in
                (error as? ConfigError)?.message.contains("GATEHOUSE_MAIL_DELIVERY_TIMEOUT") == true
            }
        }
    }

    @Test("the compose default: an empty password file (/dev/null) without a user name is no AUTH; with a user name it stops start-up")
    func emptyPasswordFile() throws {
        let relay = ["GATEHOUSE_SMTP_HOST": "smtp.example.com", "GATEHOUSE_SMTP_PASSWORD_FILE": "/dev/null"]
        let settings = try MailSettings(config: Config(environment: relay.merging(["GATEHOUSE_SMTP_USERNAME": ""]) { $1 }))
        #expect(settings.smtp?.username == nil && settings.smtp?.password == nil)
        #expect {
            try MailSettings(config: Config(environment: relay.merging(["GATEHOUSE_SMTP_USERNAME": "mailer"]) { $1 }))
        } throws: { error in
            (error as? ConfigError)?.message.contains("the file is empty") == true
        }
    }

    @Test("start-up and the SMTP client agree on which hosts are loopback (credentials without TLS)")
    func oneLoopbackCheck() throws {
        let directory = try TemporaryDirectory(prefix: "mail-loopback")
        defer { directory.remove() }
        let passwordFile = directory.path("smtp-password")
        try Data("hunter2-secret".utf8).write(to: URL(fileURLWithPath: passwordFile))
        let loopback = ["localhost", "LOCALHOST", "mail.localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"]
        let remote = ["127.example.com", "127.0.0.1.example.com", "10.0.0.1", "192.0.2.1", "::2", "::ffff:10.0.0.1", "localhost.example.com", "128.0.0.1"]
        for host in loopback + remote {
            let environment = [
                "GATEHOUSE_SMTP_HOST": host, "GATEHOUSE_SMTP_TLS": "none", "GATEHOUSE_SMTP_USERNAME": "mailer",
                "GATEHOUSE_SMTP_PASSWORD_FILE": passwordFile,
            ]
            let startUp = (try? MailSettings(config: Config(environment: environment))) != nil
            let client = SMTPConfiguration(host: host, port: 25, tls: .none, username: "mailer", password: "x").problem == nil
            #expect(startUp == loopback.contains(host), "start-up on \(host)")
            #expect(client == startUp, "the client and start-up disagree on \(host)")
        }
    }

    @Test("a tarpitting relay (each answer in time, the conversation endless) cannot hold the worker: the delivery ends at its deadline and is retried")
    func tarpitEndsAtTheDeadline() async throws {
        let harness = try await SMTPHarness.start(tarpit: 20)
        defer { harness.stop() }
        let directory = try TemporaryDirectory(prefix: "mail-tarpit")
        defer { directory.remove() }
        let store = try await SQLiteUserStore.open(path: directory.path("identity.db"))
        try await store.migrate()
        let clock = ManualClock()
        try await store.enqueueMail(
            MailMessage(kind: "password_reset", from: "Gatehouse <no-reply@example.com>", to: "ada@example.com", subject: "Reset", text: "x", date: clock.now),
            at: clock.now)
        let transport = SMTPTransport(configuration: SMTPConfiguration(host: "127.0.0.1", port: harness.port, tls: .none, commandTimeout: .seconds(30)))
        let worker = OutboxWorker(
            store: store, transport: transport, destination: "the tarpit", clock: clock.wallClock,
            policy: .init(deliveryTimeout: .seconds(2)), random: { 0 })
        let started = ContinuousClock.now
        #expect(try await worker.deliverDue() == .init(retried: 1))
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(harness.stalled)
        let row = try #require(try await store.outboxEntries().first)
        #expect(row.state == "queued" && row.lastError?.contains("within 2 s") == true, "\(row.lastError ?? "nil")")
        #expect(try harness.messages().isEmpty)
    }
}
