import Foundation
import IdentityService

/// The configuration keys of email verification, the confirmed email change and the mail
/// templates (issue 19 §3–§5).
extension ConfigTable {
    /// When verification mail is sent.
    public static let emailVerification = ConfigKey(env: "GATEHOUSE_EMAIL_VERIFICATION", defaultValue: "off", secret: false, roles: "serve, identity", help: "`off` (mail only when the app asks, POST /v1/me/email-verification), `send` (also at sign-up and upgrade) or `required` (as send, and password sign-in answers 403 email_not_verified until the address is verified).")
    /// How long a verification code works.
    public static let emailVerificationTTL = ConfigKey(env: "GATEHOUSE_EMAIL_VERIFICATION_TTL", defaultValue: "86400", secret: false, range: 300...604_800, roles: "serve, identity", help: "Seconds an email verification code works (300–604800).")
    /// How long an email change confirmation code works.
    public static let emailChangeTTL = ConfigKey(env: "GATEHOUSE_EMAIL_CHANGE_TTL", defaultValue: "3600", secret: false, range: 300...86_400, roles: "serve, identity", help: "Seconds the code mailed to a new address works (300–86400); the change takes effect only when it is confirmed.")
    /// How long the revert code sent to the old address works.
    public static let emailRevertTTL = ConfigKey(env: "GATEHOUSE_EMAIL_REVERT_TTL", defaultValue: "604800", secret: false, range: 3600...2_592_000, roles: "serve, identity", help: "Seconds the code mailed to the old address after an email change works (3600–2592000): it restores the old address and signs the account out everywhere.")
    /// Operator templates.
    public static let mailTemplates = ConfigKey(env: "GATEHOUSE_MAIL_TEMPLATES", defaultValue: nil, secret: false, roles: "serve, identity", help: "A folder of Mustache files `<kind>.<locale>.{subject,text,html}.mustache` that override or add to the built-in English and Japanese mails (kinds: password_reset, verify_email, change_email, email_changed).")

    /// The keys above, in `ConfigTable.all`.
    static let emailFlowKeys = [emailVerification, emailVerificationTTL, emailChangeTTL, emailRevertTTL, mailTemplates]
}

extension IdentityRoleSettings {
    /// `GATEHOUSE_EMAIL_VERIFICATION`, `…_VERIFICATION_TTL`, `GATEHOUSE_EMAIL_CHANGE_TTL`, `…_REVERT_TTL`.
    static func emailFlows(_ config: Config) throws -> EmailFlowSettings {
        var settings = EmailFlowSettings()
        let mode = try config.required(ConfigTable.emailVerification).lowercased()
        guard let verification = EmailFlowSettings.Verification(rawValue: mode) else {
            throw ConfigError(message: "GATEHOUSE_EMAIL_VERIFICATION (--email-verification) must be off, send or required, not '\(mode)'")
        }
        settings.verification = verification
        settings.verificationTTL = TimeInterval(try config.int(ConfigTable.emailVerificationTTL))
        settings.changeTTL = TimeInterval(try config.int(ConfigTable.emailChangeTTL))
        settings.revertTTL = TimeInterval(try config.int(ConfigTable.emailRevertTTL))
        return settings
    }

    /// `GATEHOUSE_MAIL_TEMPLATES`: the built-in templates with the folder's files over them, and
    /// how many files were read (0 when the key is unset). A bad folder or file stops the start.
    static func mailTemplates(_ config: Config) throws -> (templates: MailTemplates, files: Int) {
        guard let folder = config.string(ConfigTable.mailTemplates), !folder.isEmpty else { return (.builtIn, 0) }
        do {
            return try MailTemplates.loading(directory: URL(fileURLWithPath: folder, isDirectory: true))
        } catch let error as MailTemplates.LoadError {
            throw ConfigError(message: "GATEHOUSE_MAIL_TEMPLATES (--mail-templates): \(error.description)")
        }
    }
}
