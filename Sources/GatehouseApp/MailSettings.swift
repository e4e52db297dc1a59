import Foundation
import GatehouseSupport
import IdentityService
import Logging
import Mail
import ServiceLifecycle
import SMTPClient

/// The SMTP relay's settings (`GATEHOUSE_SMTP_*`), for the SMTP transport.
public struct SMTPSettings: Sendable, Equatable {
    /// How the connection is encrypted.
    public enum TLSMode: String, Sendable, Equatable {
        /// Plain connection upgraded with STARTTLS (required).
        case startTLS = "starttls"
        /// TLS from the first byte (port 465).
        case implicit
        /// No TLS (a loopback relay only, when credentials are set).
        case none
    }
    /// The relay's host name or address.
    public var host: String
    /// The relay's port.
    public var port: Int
    /// The encryption.
    public var tls: TLSMode
    /// The AUTH user name, or nil for no AUTH.
    public var username: String?
    /// The AUTH password (read from `GATEHOUSE_SMTP_PASSWORD_FILE`); never logged.
    public var password: String?
    /// A PEM CA file trusted besides the system roots.
    public var caFile: String?
}

/// Where the identity service's mail goes and how often it is tried (`GATEHOUSE_SMTP_*`,
/// `GATEHOUSE_MAIL_MAX_ATTEMPTS`, `GATEHOUSE_MAIL_DELIVERY_TIMEOUT`).
public struct MailSettings: Sendable {
    /// The relay, or nil for the local mailbox.
    public var smtp: SMTPSettings?
    /// Attempts before a mail is dead.
    public var maxAttempts: Int
    /// Seconds one delivery may take (`GATEHOUSE_MAIL_DELIVERY_TIMEOUT`).
    public var deliveryTimeout: Int = 60

    /// Reads and checks the mail keys of `config` (the password file is read here).
    public init(config: Config) throws {
        maxAttempts = try config.int(ConfigTable.mailMaxAttempts)
        deliveryTimeout = try config.int(ConfigTable.mailDeliveryTimeout)
        guard let host = config.string(ConfigTable.smtpHost)?.trimmingCharacters(in: .whitespaces), !host.isEmpty else {
            smtp = nil
            return
        }
        let tlsKey = ConfigTable.smtpTLS
        let tlsText = try config.required(tlsKey).lowercased()
        guard let tls = SMTPSettings.TLSMode(rawValue: tlsText) else {
            throw ConfigError(message: "\(tlsKey.env) (\(tlsKey.flag)) must be starttls, implicit or none, not '\(tlsText)'")
        }
        let username = config.string(ConfigTable.smtpUsername).flatMap { $0.isEmpty ? nil : $0 }
        var password: String?
        if let file = config.string(ConfigTable.smtpPasswordFile), !file.isEmpty {
            let key = ConfigTable.smtpPasswordFile
            // Through a file handle (SecretFiles), not FileManager.contents, which gives nothing for /dev/null.
            guard let data = SecretFiles.contents(atPath: file) else {
                throw ConfigError(message: "\(key.env) (\(key.flag)): cannot read \(file)")
            }
            var text = String(decoding: data, as: UTF8.self)
            while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
            password = text
        }
        // Without a user name there is no AUTH: an (empty) password file is not used, so a compose
        // file can always mount one (/dev/null when the relay needs no login).
        if username == nil { password = nil }
        if username != nil, password?.isEmpty ?? true {
            throw ConfigError(message: "\(ConfigTable.smtpUsername.env) is set: \(ConfigTable.smtpPasswordFile.env) (\(ConfigTable.smtpPasswordFile.flag)) must name a file holding its password (it is unset or the file is empty)")
        }
        if username != nil, tls == .none, !Self.isLoopback(host) {
            throw ConfigError(message: "\(tlsKey.env)=none with \(ConfigTable.smtpUsername.env) would send the SMTP password in plain text to \(host); use starttls or implicit (only a loopback relay may go without TLS)")
        }
        if let ca = config.string(ConfigTable.smtpCAFile), !ca.isEmpty, !FileManager.default.isReadableFile(atPath: ca) {
            throw ConfigError(message: "\(ConfigTable.smtpCAFile.env) (\(ConfigTable.smtpCAFile.flag)): cannot read \(ca)")
        }
        smtp = SMTPSettings(
            host: host, port: try config.int(ConfigTable.smtpPort), tls: tls, username: username, password: password,
            caFile: config.string(ConfigTable.smtpCAFile).flatMap { $0.isEmpty ? nil : $0 })
    }

    /// The SMTP client's own check (`SMTPConfiguration.isLoopback`): start-up refuses exactly
    /// what the client would.
    static func isLoopback(_ host: String) -> Bool { SMTPConfiguration.isLoopback(host) }

    /// The local mailbox of `dataDir`.
    public static func mailboxFolder(dataDir: String) -> URL {
        URL(fileURLWithPath: dataDir).appendingPathComponent("mailbox")
    }

    /// The transport mail goes through, and where that is in words for the log: the local
    /// mailbox of `dataDir` without a relay, else what `smtp` makes of the relay's settings
    /// (the SMTP client's seam).
    public func makeTransport(
        dataDir: String, clock: WallClock, smtp makeSMTP: (SMTPSettings) throws -> any MailTransport
    ) throws -> (transport: any MailTransport, destination: String) {
        guard let smtp else {
            let folder = Self.mailboxFolder(dataDir: dataDir)
            return (LocalMailbox(folder: folder, clock: clock), "the local mailbox \(folder.path) (`gatehouse mail list`)")
        }
        return (try makeSMTP(smtp), "the SMTP relay \(smtp.host):\(smtp.port) (\(smtp.tls.rawValue))")
    }
}

/// Runs the identity service's `OutboxWorker` until graceful shutdown.
public struct OutboxDelivery: Service {
    /// The worker.
    public let worker: OutboxWorker

    /// Delivers until graceful shutdown (a delivery under way is cancelled; its mail stays queued).
    public func run() async throws {
        await cancelWhenGracefulShutdown { await worker.run() }
    }
}
