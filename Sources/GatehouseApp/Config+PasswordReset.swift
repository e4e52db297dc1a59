import Foundation
import IdentityService
import Mail

/// The configuration keys of password reset and its mail (issue 19, part E3).
extension ConfigTable {
    /// Password reset requests per client address at the gateway.
    public static let rateLimitPasswordReset = ConfigKey(env: "GATEHOUSE_RATE_LIMIT_PASSWORD_RESET", defaultValue: "10/h burst=5", secret: false, roles: "serve, gateway", help: "Password reset requests (`POST /v1/password-reset`) per client address, as for GATEHOUSE_RATE_LIMIT_SIGN_IN. Confirmations count as sign-ins.")
    /// How long a password reset code works.
    public static let passwordResetTTL = ConfigKey(env: "GATEHOUSE_PASSWORD_RESET_TTL", defaultValue: "3600", secret: false, range: 300...86_400, roles: "serve, identity", help: "Seconds a password reset code works (300–86400); it works once, and a newer request voids older codes.")
    /// The app name in mails.
    public static let appName = ConfigKey(env: "GATEHOUSE_APP_NAME", defaultValue: "Gatehouse", secret: false, roles: "serve, gateway, identity", help: "The app's name in mails (subject and body) and at the top of the gateway's action pages (`/actions`), at most 64 characters.")
    /// The sender of mails.
    public static let mailFrom = ConfigKey(env: "GATEHOUSE_MAIL_FROM", defaultValue: "Gatehouse <no-reply@localhost>", secret: false, roles: "serve, identity", help: "The From of every mail: `Name <address>` or an address.")
    /// Where links in mails point.
    public static let mailLinkBase = ConfigKey(env: "GATEHOUSE_MAIL_LINK_BASE", defaultValue: nil, secret: false, roles: "serve, identity", help: "Where links in mails point: `<base>?mode=<mode>&code=<code>&lang=<locale>` (modes resetPassword, verifyEmail, verifyAndChangeEmail, recoverEmail). Default: the gateway's own pages, `<GATEHOUSE_PUBLIC_URL>/actions`; set your app's universal link or your own page instead, or `none` for mails with only the code.")

    /// The keys above, in `ConfigTable.all`.
    static let passwordResetKeys = [rateLimitPasswordReset, passwordResetTTL, appName, mailFrom, mailLinkBase]
}

extension IdentityRoleSettings {
    /// `GATEHOUSE_PASSWORD_RESET_TTL`, `GATEHOUSE_APP_NAME`, `GATEHOUSE_MAIL_FROM`, `GATEHOUSE_MAIL_LINK_BASE`.
    static func passwordReset(_ config: Config) throws -> PasswordResetSettings {
        var settings = PasswordResetSettings()
        settings.ttl = TimeInterval(try config.int(ConfigTable.passwordResetTTL))
        let name = try config.required(ConfigTable.appName)
        guard name.count <= 64, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ConfigError(message: "GATEHOUSE_APP_NAME (--app-name) must be at most 64 characters without control characters")
        }
        settings.appName = name
        settings.from = try config.required(ConfigTable.mailFrom)
        let probe = MailComposer(from: settings.from).message(
            .passwordReset, to: "check@example.com", code: "x", ttl: settings.ttl, preferences: "en", date: Date())
        if let problem = probe.problem {
            throw ConfigError(message: "GATEHOUSE_MAIL_FROM (--mail-from) is not a sender address (`Name <address>` or `address`): \(problem)")
        }
        let configured = config.string(ConfigTable.mailLinkBase).flatMap { $0.isEmpty ? nil : $0 }
        if configured?.lowercased() == "none" { return settings }
        do {
            let base = try configured ?? (GatewayRoleSettings.publicURL(config) + "/actions")
            guard base.hasPrefix("https://") || base.hasPrefix("http://"), URL(string: base) != nil,
                !base.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F })
            else {
                throw ConfigError(message: "GATEHOUSE_MAIL_LINK_BASE (--mail-link-base) must be an http(s) URL, not '\(base)'")
            }
            settings.linkBase = base
        }
        return settings
    }
}
