import Crypto
import Foundation
import IdentityPorts
import ProviderTokens

/// Everything the identity service can be configured with.
public struct IdentityConfiguration: Sendable {
    /// Argon2id parameters for new hashes; older hashes are upgraded at sign-in.
    public var argon2: Argon2Parameters
    /// Limits for verifying imported hashes.
    public var verifyLimits: HashVerifyLimits
    /// Fewest characters (Unicode scalars after NFKC) in a password; 8 is NIST's floor.
    public var minPasswordLength: Int
    /// Most characters in a password.
    public var maxPasswordLength: Int
    /// Hashing threads (the number of cores by default).
    public var hashWorkers: Int
    /// Hashing jobs that may wait before callers get `overloaded`.
    public var hashQueueLimit: Int
    /// Per-account throttling of failed password checks (held in memory by each identity
    /// instance): 5 failures in 15 minutes, then waits from 1 s doubling up to 5 minutes.
    public var attemptThrottle: PasswordAttemptThrottle.Settings
    /// The settings written for every new user (sign-up and anonymous): a JSON object of at most
    /// 16 KiB (`GATEHOUSE_DEFAULT_SETTINGS`, checked at start-up by `SettingsDocument.validDefault`).
    public var defaultSettingsJSON = "{}"
    /// Seconds after a sign-in (`auth_time`) within which credential changes and self-deletion
    /// need no re-authentication (`requires_recent_login` past it); 0 refuses them always.
    public var recentLoginWindow: TimeInterval = 300
    /// Anonymous users inactive this long (seconds; 30 days) are removed with their sessions by
    /// the `AnonymousSweep`; 0 turns that off. Not an `init` parameter: set it on the value.
    public var anonymousRetention: TimeInterval = 30 * 86_400
    /// How long a `migration_required` resume handle works, in seconds (300 by default).
    public var migrationResumeTTL: TimeInterval = ResumeHandles.defaultTTL
    /// Password reset: code lifetime, per-address mail limits, sender, app name and link base.
    public var passwordReset = PasswordResetSettings()
    /// Email verification and change: mode, code lifetimes, per-user mail limits.
    public var emailFlows = EmailFlowSettings()
    /// The mail templates (built in unless `GATEHOUSE_MAIL_TEMPLATES` overrides them).
    public var mailTemplates = MailTemplates.builtIn
    /// Seconds the change log keeps a change (`GATEHOUSE_CHANGE_LOG_RETENTION`; a day).
    public var changeLogRetention: TimeInterval = 86_400
    /// Most changes the change log keeps per user (`GATEHOUSE_CHANGE_LOG_MAX_PER_USER`).
    public var changeLogMaxPerUser = 1000
    /// Seconds the audit log keeps an event (`GATEHOUSE_AUDIT_RETENTION`; 90 days).
    public var auditRetention: TimeInterval = 7_776_000
    /// The identity providers whose ID tokens sign users in (`GATEHOUSE_APPLE_CLIENT_IDS`,
    /// `GATEHOUSE_GOOGLE_CLIENT_IDS`, `GATEHOUSE_OIDC_PROVIDERS`); none by default.
    public var providers: [ProviderConfiguration] = []
    /// The provider token verifier's settings (skew, key cache policy, replay memory).
    public var providerOptions = IDTokenVerifier.Options()
    /// Sign in with Apple's server side (`GATEHOUSE_APPLE_TEAM_ID`, `…_KEY_ID`,
    /// `…_PRIVATE_KEY_FILE`); nil: authorization codes are not exchanged.
    public var appleServer: AppleServerConfiguration?

    /// Settings with the given limits; unset ones take the documented defaults.
    public init(
        argon2: Argon2Parameters = .owasp,
        verifyLimits: HashVerifyLimits = HashVerifyLimits(),
        minPasswordLength: Int = 8,
        maxPasswordLength: Int = 256,
        hashWorkers: Int = ProcessInfo.processInfo.activeProcessorCount,
        hashQueueLimit: Int = 64,
        attemptThrottle: PasswordAttemptThrottle.Settings = PasswordAttemptThrottle.Settings()
    ) {
        self.attemptThrottle = attemptThrottle
        self.argon2 = argon2
        self.verifyLimits = verifyLimits
        self.minPasswordLength = minPasswordLength
        self.maxPasswordLength = maxPasswordLength
        self.hashWorkers = hashWorkers
        self.hashQueueLimit = hashQueueLimit
    }
}

/// What Sign in with Apple's server side needs: the team's key and where Apple's endpoints are.
public struct AppleServerConfiguration: Sendable {
    /// The Apple developer team id (the client secret's `iss`).
    public var teamID: String
    /// The id of the Sign in with Apple key (the client secret's `kid`).
    public var keyID: String
    /// The key's `.p8` PEM text.
    public var privateKeyPEM: String
    /// Apple's token endpoint.
    public var tokenURL: URL
    /// Apple's revocation endpoint.
    public var revokeURL: URL
    /// Seals Apple's refresh tokens at rest (the key-encryption key).
    public var sealingKey: SymmetricKey

    /// A configuration of these parts.
    public init(teamID: String, keyID: String, privateKeyPEM: String, tokenURL: URL, revokeURL: URL, sealingKey: SymmetricKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKeyPEM = privateKeyPEM
        self.tokenURL = tokenURL
        self.revokeURL = revokeURL
        self.sealingKey = sealingKey
    }
}
