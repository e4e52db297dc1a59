import Mail
import SMTPClient

extension MailSettings {
    /// The transport of a configured relay: the SMTP client (`SMTPTransport`), one connection per
    /// mail, certificates verified, credentials never sent without TLS but to loopback.
    public static let smtpClient: @Sendable (SMTPSettings) throws -> any MailTransport = { settings in
        let tls: SMTPConfiguration.TLSMode
        switch settings.tls {
        case .startTLS: tls = .startTLS
        case .implicit: tls = .implicit
        case .none: tls = .none
        }
        return SMTPTransport(configuration: SMTPConfiguration(
            host: settings.host, port: settings.port, tls: tls, caFile: settings.caFile, username: settings.username,
            password: settings.password))
    }
}
