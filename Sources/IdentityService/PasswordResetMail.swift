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

/// The password reset mail, built from the built-in English and Japanese Mustache templates
/// (subject, text, HTML). Variables: `appName`, `code`, `link` (optional), `minutes`.
public struct PasswordResetMail: Sendable {
    /// The mail kind in the outbox.
    public static let kind = "password_reset"
    /// The locales with built-in templates; others fall back to `en`.
    public static let locales = ["en", "ja"]

    struct Templates: Sendable {
        let subject: MustacheTemplate
        let text: MustacheTemplate
        let html: MustacheTemplate
    }

    let templates: [String: Templates]

    /// The built-in templates, compiled once.
    public static let builtIn = PasswordResetMail()

    /// Compiles the built-in templates (they are fixed, so a failure is a programming error).
    public init() {
        var templates: [String: Templates] = [:]
        for (locale, source) in Self.sources {
            // swiftlint:disable:next force_try
            templates[locale] = try! Templates(
                subject: MustacheTemplate(string: source.subject), text: MustacheTemplate(string: source.text),
                html: MustacheTemplate(string: source.html))
        }
        self.templates = templates
    }

    /// `en` or `ja` from a locale tag the gateway passed (`ja`, `ja-JP`, ...); `en` otherwise.
    public static func locale(_ tag: String) -> String {
        let primary = tag.split(separator: "-").first.map { $0.lowercased() } ?? ""
        return locales.contains(primary) ? primary : "en"
    }

    /// The mail for `code` to `recipient`, in `locale`, made at `date`.
    public func message(to recipient: String, code: String, locale: String, settings: PasswordResetSettings, date: Date) -> MailMessage {
        let chosen = templates[Self.locale(locale)] ?? templates["en"]!
        var values: [String: Any] = [
            "appName": settings.appName, "code": code, "minutes": String(Int((settings.ttl / 60).rounded(.up))),
        ]
        if let base = settings.linkBase, !base.isEmpty {
            let separator = base.contains("?") ? "&" : "?"
            values["link"] = "\(base)\(separator)mode=resetPassword&code=\(code)"
        }
        let subject = chosen.subject.render(values).trimmingCharacters(in: .whitespacesAndNewlines)
            .replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " ")
        let domain = Self.domain(of: settings.from)
        return MailMessage(
            kind: Self.kind, from: settings.from, to: recipient, subject: subject, text: chosen.text.render(values),
            html: chosen.html.render(values), date: date, domain: domain)
    }

    /// The sender's domain, for the Message-ID (`gatehouse.invalid` when it has none).
    static func domain(of from: String) -> String {
        let address = MailMessage(kind: kind, from: from, to: "x@x", subject: "", text: "", date: Date()).fromAddress
        guard let at = address.lastIndex(of: "@") else { return "gatehouse.invalid" }
        let domain = address[address.index(after: at)...]
        return domain.isEmpty ? "gatehouse.invalid" : String(domain)
    }

    // MARK: Built-in templates

    /// Text templates use `{{{…}}}` (no HTML escaping); HTML ones `{{…}}` (escaped).
    static let sources: [String: (subject: String, text: String, html: String)] = [
        "en": (
            subject: "Reset your {{{appName}}} password",
            text: """
                Someone asked to reset the password of your {{{appName}}} account.

                Your reset code:

                {{{code}}}
                {{#link}}

                Or open this link to choose a new password:
                {{{link}}}
                {{/link}}

                The code works once, for {{{minutes}}} minutes. If you did not ask for it, ignore this mail: your password stays as it is.

                """,
            html: """
                <!doctype html>
                <html lang="en"><body>
                <p>Someone asked to reset the password of your {{appName}} account.</p>
                <p>Your reset code:</p>
                <p><code>{{code}}</code></p>
                {{#link}}<p><a href="{{link}}">Choose a new password</a></p>{{/link}}
                <p>The code works once, for {{minutes}} minutes. If you did not ask for it, ignore this mail: your password stays as it is.</p>
                </body></html>

                """),
        "ja": (
            subject: "{{{appName}}} のパスワード再設定",
            text: """
                {{{appName}}} アカウントのパスワード再設定のご依頼を受け付けました。

                再設定コード:

                {{{code}}}
                {{#link}}

                次のリンクから新しいパスワードを設定することもできます:
                {{{link}}}
                {{/link}}

                このコードは {{{minutes}}} 分間、1 回だけ使えます。お心当たりのない場合は、このメールを破棄してください。パスワードは変更されません。

                """,
            html: """
                <!doctype html>
                <html lang="ja"><body>
                <p>{{appName}} アカウントのパスワード再設定のご依頼を受け付けました。</p>
                <p>再設定コード:</p>
                <p><code>{{code}}</code></p>
                {{#link}}<p><a href="{{link}}">新しいパスワードを設定する</a></p>{{/link}}
                <p>このコードは {{minutes}} 分間、1 回だけ使えます。お心当たりのない場合は、このメールを破棄してください。パスワードは変更されません。</p>
                </body></html>

                """),
    ]
}
