import Foundation
import IdentityPorts

/// What password reset needs beyond the store: code lifetime, per-address mail limits, and what
/// the mail says (`GATEHOUSE_PASSWORD_RESET_TTL`, `GATEHOUSE_APP_NAME`, `GATEHOUSE_MAIL_FROM`,
/// `GATEHOUSE_MAIL_LINK_BASE`).
public struct PasswordResetSettings: Sendable, Equatable {
    /// Seconds a reset code works (3600 by default).
    public var ttl: TimeInterval = 3600
    /// The app's name, in the mail's subject and text.
    public var appName = "Gatehouse"
    /// The sender (`Name <address>` or a bare address).
    public var from = "Gatehouse <no-reply@localhost>"
    /// Where links in mails point (`MailComposer.linkBase`); nil: mails carry only the code.
    public var linkBase: String?
    /// At most this many reset mails to one address a minute (1) ...
    public var perMinute = 1
    /// ... and this many an hour (5); extra requests answer the same and send nothing.
    public var perHour = 5

    /// The documented defaults.
    public init() {}
}
