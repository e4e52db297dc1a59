import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import ProtoCodec
import ProviderTokens
import RPCRouting

/// The identity service's parts and settings, and the feature handlers made of them: `router()`
/// gives an `RPCRouter` that an RPC server (or `LocalCaller`) feeds. This type only assembles:
/// each feature (`accounts`, `migration`, `providers`, `appleNotifications`, `passwordResets`,
/// `emailVerification`, `emailChanges`, `admin`, `adminKeys`, `imports`, `changes`, `audit`)
/// is a struct of its own that holds only the storage ports and settings it uses.
///
/// Every failure is an `IdentityError` (or the token service's `RPCError`), so each has a
/// stable code. Validation happens before anything is written: a refused request writes nothing.
public struct IdentityHandlers: Sendable {
    /// Where everything the service keeps lives (SQLite or PostgreSQL, as the composition root chose).
    public let store: any IdentityStorage
    /// Hashes and verifies passwords on the hash pool.
    public let hasher: PasswordHasher
    /// What a new password must satisfy.
    public let policy: PasswordPolicy
    /// Reaches the token service (`token.issueSession`).
    public let tokens: any RPCCaller
    /// Where `user.*` events go (best effort).
    public let events: any EventSink
    /// Stamps records and events (created, updated, signed in).
    public let clock: WallClock
    /// Where failures that a caller cannot see are logged.
    public let logger: Logger
    /// Throttles password checks per account and client address (sign-in): guesses from one
    /// address wait after `threshold` failures without slowing the owner elsewhere.
    public let throttle: PasswordAttemptThrottle
    /// Throttles password checks per account from all addresses together, at ten times the
    /// threshold: guesses spread over many addresses still wait (`PasswordAttemptThrottle.Settings.accountWide`).
    public let accountThrottle: PasswordAttemptThrottle
    /// The settings every new user gets (sign-up and anonymous): a JSON object of at most 16 KiB
    /// (`GATEHOUSE_DEFAULT_SETTINGS`, checked at start-up; `{}` by default).
    public var defaultSettingsJSON = "{}"
    /// How long after a sign-in (the session's `auth_time`) credential changes and self-deletion
    /// are allowed without re-authenticating (`GATEHOUSE_RECENT_LOGIN_WINDOW`); 0: never.
    public var recentLoginWindow: TimeInterval = 300
    /// The resume handles of `migration_required` answers (in memory; `GATEHOUSE_MIGRATION_RESUME_TTL`).
    public var resumeHandles = ResumeHandles()
    /// Verifies provider ID tokens (nil: no provider configured, every provider is unknown).
    public var providerTokens: IDTokenVerifier?
    /// Sign in with Apple's server side (the team key configured), or nil.
    public var apple: AppleServerSide?
    /// Verifies Apple's server-to-server notifications (Sign in with Apple configured), or nil.
    public var appleNotifications: AppleNotificationVerifier?
    /// Samples throttled refusals for the audit log (one per key a minute).
    public var auditSampler = AuditSampler()
    /// Password reset: code lifetime, per-address mail limits, the mail's sender, app name, link.
    public var passwordReset = PasswordResetSettings()
    /// Email verification and change: mode, code lifetimes, per-user mail limits.
    public var emailFlows = EmailFlowSettings()
    /// The mail templates (built in unless the operator's files override them).
    public var mailTemplates = MailTemplates.builtIn
    /// Builds every mail: the templates with the app name, sender and link base of `passwordReset`.
    public var mailComposer: MailComposer {
        MailComposer(templates: mailTemplates, appName: passwordReset.appName, from: passwordReset.from, linkBase: passwordReset.linkBase)
    }
    /// The mail outbox's delivery figures (the role's `OutboxWorker` writes them), for `stats()`.
    public var outboxMetrics = OutboxMetrics()

    /// Handlers over these parts; `clock` stamps every write. Without a `throttle`, one with the
    /// default settings on `clock`.
    public init(
        store: any IdentityStorage, hasher: PasswordHasher, policy: PasswordPolicy, tokens: any RPCCaller,
        events: any EventSink = DiscardingEventSink(), clock: WallClock = .system,
        logger: Logger = Logger(label: "gatehouse.identity"), throttle: PasswordAttemptThrottle? = nil
    ) {
        self.throttle = throttle ?? PasswordAttemptThrottle(clock: clock)
        self.accountThrottle = PasswordAttemptThrottle(settings: self.throttle.settings.accountWide, clock: clock)
        self.store = store
        self.hasher = hasher
        self.policy = policy
        self.tokens = tokens
        self.events = events
        self.clock = clock
        self.logger = logger
    }

    // MARK: The features

    /// What every feature shares.
    var basics: HandlerBasics {
        HandlerBasics(
            tokens: tokens, events: events, clock: clock, logger: logger,
            audit: AuditTrail(store: store, sampler: auditSampler, clock: clock, logger: logger), recentLoginWindow: recentLoginWindow)
    }

    /// The policy and hash pool of new passwords.
    var passwords: NewPasswords { NewPasswords(hasher: hasher, policy: policy) }

    /// The mail templates and the mail flows' settings.
    var mail: MailParts {
        MailParts(composer: mailComposer, templates: mailTemplates, passwordReset: passwordReset, emailFlows: emailFlows)
    }

    /// Password checks under the throttles, and the end of every sign-in.
    var signIns: PasswordSignIn {
        PasswordSignIn(
            basics: basics, store: store, passwords: passwords, throttle: throttle, accountThrottle: accountThrottle,
            verificationRequired: emailFlows.verification == .required)
    }

    /// The verification mail of a sign-up or an upgrade.
    var signUpMail: VerificationMail {
        VerificationMail(basics: basics, store: store, mailComposer: mailComposer, emailFlows: emailFlows)
    }

    /// What a provider sign-in checks and keeps besides the user (links, Apple's token).
    var providerLinks: ProviderLinks {
        ProviderLinks(basics: basics, store: store, apple: apple)
    }

    /// Sign-up, sign-in, the current user, profile, re-authentication, password change, deletion.
    public var accounts: AccountHandlers {
        AccountHandlers(
            basics: basics, store: store, signIns: signIns, passwords: passwords, defaultSettingsJSON: defaultSettingsJSON,
            signUpMail: signUpMail, migration: migration)
    }

    /// An anonymous user's upgrade, and its migration to an existing account.
    public var migration: MigrationHandlers {
        MigrationHandlers(
            basics: basics, store: store, signIns: signIns, passwords: passwords, resumeHandles: resumeHandles,
            sharedResumeHandles: store.sharedResumeHandles, signUpMail: signUpMail, providerLinks: providerLinks)
    }

    /// Sign-in, link, unlink and re-authentication with a provider's ID token.
    public var providers: ProviderHandlers {
        ProviderHandlers(
            basics: basics, store: store, signIns: signIns, links: providerLinks, migration: migration, resumeHandles: resumeHandles,
            sharedResumeHandles: store.sharedResumeHandles, sharedReplayGuard: store.sharedReplayGuard, verifier: providerTokens,
            defaultSettingsJSON: defaultSettingsJSON)
    }

    /// Apple's server-to-server notifications.
    public var appleNotificationHandlers: AppleNotificationHandlers {
        AppleNotificationHandlers(basics: basics, store: store, verifier: appleNotifications)
    }

    /// Password reset by mail.
    public var passwordResets: PasswordResetHandlers {
        PasswordResetHandlers(basics: basics, store: store, passwords: passwords, mail: mail)
    }

    /// Email verification.
    public var emailVerification: EmailVerificationHandlers {
        EmailVerificationHandlers(basics: basics, store: store, mail: signUpMail)
    }

    /// The confirmed email change and its revert.
    public var emailChanges: EmailChangeHandlers {
        EmailChangeHandlers(basics: basics, store: store, mail: mail)
    }

    /// The operator's and the admin API's user operations.
    public var admin: AdminHandlers {
        AdminHandlers(basics: basics, store: store, passwords: passwords, defaultSettingsJSON: defaultSettingsJSON, mail: mail)
    }

    /// Admin API keys.
    public var adminKeys: AdminKeyHandlers {
        AdminKeyHandlers(basics: basics, store: store)
    }

    /// `gatehouse users import` and `export`.
    public var imports: ImportHandlers {
        ImportHandlers(basics: basics, store: store, hashLimits: hasher.limits)
    }

    /// The change log for streams and `gatehouse users changes`.
    public var changes: ChangeHandlers { ChangeHandlers(store: store) }

    /// The audit log for `gatehouse audit`.
    public var audit: AuditHandlers { AuditHandlers(store: store) }

    /// A router serving every identity method.
    public func router() -> RPCRouter {
        var router = RPCRouter()
        accounts.register(&router)
        migration.register(&router)
        admin.register(&router)
        passwordResets.register(&router)
        emailChanges.register(&router)
        emailVerification.register(&router)
        imports.register(&router)
        changes.register(&router)
        audit.register(&router)
        adminKeys.register(&router)
        providers.register(&router)
        appleNotificationHandlers.register(&router)
        if let reads = store.synchronousReads {
            // Point reads that never suspend: answered as the request arrives (see `registerSync`).
            router.registerSync(IdentityAPI.getUser) { request, _ in try AccountHandlers.getUser(request, user: reads.userNow(id:)) }
            router.registerSync(IdentityAPI.claimsForSession) { request, _ in
                try AccountHandlers.claimsForSession(request, user: reads.userNow(id:))
            }
        } else {
            let accounts = accounts
            router.register(IdentityAPI.getUser) { request, _ in try await accounts.getUser(request) }
            router.register(IdentityAPI.claimsForSession) { request, _ in try await accounts.claimsForSession(request) }
        }
        let policy = policy
        router.registerSync(IdentityAPI.passwordStrength) { request, _ in AccountHandlers.passwordStrength(request, policy: policy) }
        router.registerSync(IdentityAPI.stats) { _, _ in stats() }
        return router
    }

    /// The hashing pool's state (`identity.stats`).
    public func stats() -> IdentityStats {
        let pool = hasher.pool.snapshot
        return IdentityStats(
            hashWorkers: Int32(hasher.pool.workers), hashBusyWorkers: Int32(pool.running), hashQueueDepth: Int32(pool.queued),
            hashQueueLimit: Int32(hasher.pool.queueLimit), hashCompleted: Int64(pool.completed), hashRejected: Int64(pool.rejected))
            .withMail(outboxMetrics.snapshot)
    }

    // MARK: Codes

    /// A new one-time code: 32 random bytes, base64url without padding (43 characters).
    public static func newResetCode() -> String { IdentityInput.newResetCode() }

    /// The stored form of a code: its SHA-256.
    public static func resetCodeHash(_ code: String) -> Data { IdentityInput.resetCodeHash(code) }

    /// When the password hash must be done for a call that must answer by `deadline` (see `IdentityInput.hashDeadline`).
    static func hashDeadline(_ deadline: ContinuousClock.Instant?, now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        IdentityInput.hashDeadline(deadline, now: now)
    }
}
