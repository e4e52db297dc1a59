import Foundation
import Mail
import Mustache

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
    /// When set, the mail carries a link `<linkBase>?mode=resetPassword&code=<code>`.
    public var linkBase: String?
    /// At most this many reset mails to one address a minute (1) ...
    public var perMinute = 1
    /// ... and this many an hour (5); extra requests answer the same and send nothing.
    public var perHour = 5

    /// The documented defaults.
    public init() {}
}

/// The password reset mail (issue 19 §2), through `MailComposer` and the `password_reset`
/// templates. Variables: `appName`, `code`, `link` (optional), `minutes`.
public struct PasswordResetMail: Sendable {
    /// The mail kind in the outbox.
    public static let kind = MailTemplates.Kind.passwordReset.rawValue

    /// The templates used.
    public var templates: MailTemplates

    /// The built-in templates.
    public static let builtIn = PasswordResetMail(templates: .builtIn)

    /// The reset mail from `templates`.
    public init(templates: MailTemplates) { self.templates = templates }

    /// The best built-in locale for a preference list (`ja`, `ja-JP`, `ja-JP,en`, ...); `en` otherwise.
    public static func locale(_ tag: String) -> String { MailTemplates.builtIn.locale(tag) }

    /// The mail for `code` to `recipient`, in the best locale for `locale`, made at `date`.
    public func message(to recipient: String, code: String, locale: String, settings: PasswordResetSettings, date: Date) -> MailMessage {
        MailComposer(templates: templates, appName: settings.appName, from: settings.from, linkBase: settings.linkBase)
            .message(.passwordReset, to: recipient, code: code, ttl: settings.ttl, preferences: locale, date: date)
    }
}
