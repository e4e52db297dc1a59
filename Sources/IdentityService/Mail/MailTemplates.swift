import Foundation
import IdentityPorts
import Mail
import Mustache

/// The mails the identity service sends, each a subject, a plain-text body and an HTML body per
/// locale, as Mustache templates (issue 19 §5). English and Japanese are built in
/// (`MailTemplates+BuiltIn.swift`); operators override or add them with files
/// (`MailTemplates.loading(directory:)`, `GATEHOUSE_MAIL_TEMPLATES`).
///
/// Variables every kind gets: `appName`, `code`, `link` (absent when mails carry no link),
/// `linkBase` (the configured base of links, absent likewise),
/// `minutes`, `hours` and `days` (how long the code works, rounded up), `email` (the recipient).
/// `change_email` and `email_changed` also get `oldEmail` and `newEmail`.
public struct MailTemplates: Sendable {
    /// What a mail is for; the raw value is the outbox `kind` and the template file prefix.
    public enum Kind: String, Sendable, CaseIterable {
        /// A password reset code (link mode `resetPassword`).
        case passwordReset = "password_reset"
        /// An email verification code (link mode `verifyEmail`).
        case verifyEmail = "verify_email"
        /// To the new address: confirm the change (link mode `verifyAndChangeEmail`).
        case changeEmail = "change_email"
        /// To the old address after a confirmed change: undo it (link mode `recoverEmail`).
        case emailChanged = "email_changed"

        /// The `mode` of the link (Firebase's action modes, so apps moving over keep their handler).
        public var linkMode: String {
            switch self {
            case .passwordReset: "resetPassword"
            case .verifyEmail: "verifyEmail"
            case .changeEmail: "verifyAndChangeEmail"
            case .emailChanged: "recoverEmail"
            }
        }
    }

    /// One locale's templates of one kind.
    struct Set: Sendable {
        var subject: MustacheTemplate
        var text: MustacheTemplate
        var html: MustacheTemplate?
    }

    /// kind → locale → templates. Every kind has `en`.
    var sets: [Kind: [String: Set]]

    /// The built-in English and Japanese templates, compiled once.
    public static let builtIn = MailTemplates()

    /// Compiles the built-in templates (they are fixed, so a failure is a programming error).
    public init() {
        var sets: [Kind: [String: Set]] = [:]
        for (kind, locales) in Self.builtInSources {
            for (locale, source) in locales {
                // swiftlint:disable:next force_try
                sets[kind, default: [:]][locale] = try! Set(
                    subject: MustacheTemplate(string: source.subject), text: MustacheTemplate(string: source.text),
                    html: MustacheTemplate(string: source.html))
            }
        }
        self.sets = sets
    }

    /// Every locale some kind has a template for, sorted.
    public var locales: [String] { Array(Swift.Set(sets.values.flatMap(\.keys))).sorted() }

    /// The best locale of `kind` for a preference list (`ja-JP,ja,en`: comma-separated language
    /// tags, best first; the primary subtag is what counts): the first one with templates, else `en`.
    public func locale(_ preferences: String, for kind: Kind = .passwordReset) -> String {
        let available = sets[kind] ?? [:]
        for tag in preferences.split(separator: ",").prefix(16) {
            let primary = tag.split(separator: "-").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
            if available[primary] != nil { return primary }
        }
        return "en"
    }

    /// Renders `kind` in the best locale for `preferences` with `values`: the subject (one line,
    /// trimmed), the text body, and the HTML body (nil when the locale has none).
    public func render(_ kind: Kind, preferences: String, values: [String: Any]) -> (locale: String, subject: String, text: String, html: String?) {
        let locale = locale(preferences, for: kind)
        let chosen = sets[kind]?[locale] ?? sets[kind]!["en"]!
        let subject = chosen.subject.render(values).trimmingCharacters(in: .whitespacesAndNewlines)
            .replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " ")
        return (locale, subject, chosen.text.render(values), chosen.html?.render(values))
    }
}

/// Who mails come from and where their links point (`GATEHOUSE_APP_NAME`, `GATEHOUSE_MAIL_FROM`,
/// `GATEHOUSE_MAIL_LINK_BASE`), with the templates: builds every mail the identity service sends.
public struct MailComposer: Sendable {
    /// The templates (built in unless the operator's files override them).
    public var templates: MailTemplates
    /// The app's name, in subjects and bodies.
    public var appName: String
    /// The sender (`Name <address>` or a bare address).
    public var from: String
    /// When set, mails carry a link `<linkBase>?mode=<mode>&code=<code>&lang=<locale>`.
    public var linkBase: String?

    /// A composer with these settings.
    public init(templates: MailTemplates = .builtIn, appName: String = "Gatehouse", from: String = "Gatehouse <no-reply@localhost>", linkBase: String? = nil) {
        self.templates = templates
        self.appName = appName
        self.from = from
        self.linkBase = linkBase
    }

    /// The link of `kind` for `code`, or nil without a link base.
    public func link(_ kind: MailTemplates.Kind, code: String, locale: String) -> String? {
        guard let base = linkBase, !base.isEmpty else { return nil }
        let separator = base.contains("?") ? "&" : "?"
        return "\(base)\(separator)mode=\(kind.linkMode)&code=\(code)&lang=\(locale)"
    }

    /// The mail of `kind` to `recipient` carrying `code` (valid `ttl` seconds), in the best locale
    /// for `preferences`, made at `date`; `extra` adds variables (`oldEmail`, `newEmail`). The mail
    /// expires with its code (`expiresAt` = `date` + `ttl`): the outbox does not send it later.
    public func message(
        _ kind: MailTemplates.Kind, to recipient: String, code: String, ttl: TimeInterval, preferences: String, date: Date,
        extra: [String: String] = [:]
    ) -> MailMessage {
        let locale = templates.locale(preferences, for: kind)
        var values: [String: Any] = [
            "appName": appName, "code": code, "email": recipient,
            "minutes": String(Int((ttl / 60).rounded(.up))), "hours": String(Int((ttl / 3600).rounded(.up))),
            "days": String(Int((ttl / 86_400).rounded(.up))),
        ]
        for (key, value) in extra { values[key] = value }
        if let link = link(kind, code: code, locale: locale) { values["link"] = link }
        if let base = linkBase, !base.isEmpty { values["linkBase"] = base }
        let rendered = templates.render(kind, preferences: locale, values: values)
        return MailMessage(
            kind: kind.rawValue, from: from, to: recipient, subject: rendered.subject, text: rendered.text, html: rendered.html,
            date: date, domain: Self.domain(of: from), expiresAt: date.addingTimeInterval(ttl))
    }

    /// The sender's domain, for the Message-ID (`gatehouse.invalid` when it has none).
    static func domain(of from: String) -> String {
        let address = MailMessage(kind: "probe", from: from, to: "x@x", subject: "", text: "", date: Date()).fromAddress
        guard let at = address.lastIndex(of: "@") else { return "gatehouse.invalid" }
        let domain = address[address.index(after: at)...]
        return domain.isEmpty ? "gatehouse.invalid" : String(domain)
    }
}
