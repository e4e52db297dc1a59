import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import ProtoCodec
import ProviderTokens
import RPCRouting

/// The identity service's RPC methods, independent of any transport: `router()` gives an
/// `RPCRouter` that an RPC server (or `LocalCaller`) feeds.
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

    /// The longest display name, in characters.
    public static let maxDisplayNameLength = 256
    /// The longest photo URL, in bytes.
    public static let maxPhotoURLLength = 2048

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

    /// A router serving every identity method.
    public func router() -> RPCRouter {
        var router = RPCRouter()
        router.register(IdentityAPI.signUp) { request, context in try await signUp(request, deadline: context.deadline) }
        router.register(IdentityAPI.signIn) { request, context in try await signIn(request, deadline: context.deadline) }
        router.register(IdentityAPI.signInAnonymously) { request, context in try await signInAnonymously(request, deadline: context.deadline) }
        router.register(IdentityAPI.upgradeAnonymous) { request, context in try await upgradeAnonymous(request, deadline: context.deadline) }
        router.register(IdentityAPI.resumeSignIn) { request, context in try await resumeSignIn(request, deadline: context.deadline) }
        router.register(IdentityAPI.updateProfile) { request, _ in try await updateProfile(request) }
        router.register(IdentityAPI.deleteUser) { request, _ in try await deleteUser(request) }
        router.register(IdentityAPI.setDisabled) { request, _ in try await setDisabled(request) }
        router.register(IdentityAPI.setCustomClaims) { request, _ in try await setCustomClaims(request) }
        registerAccountMethods(&router)
        registerPasswordResetMethods(&router)
        registerEmailChangeMethods(&router)
        registerEmailVerificationMethods(&router)
        registerImportMethods(&router)
        registerChangeMethods(&router)
        registerAuditMethods(&router)
        registerAdminAPIMethods(&router)
        registerProviderMethods(&router)
        registerAppleMethods(&router)
        if let reads = store.synchronousReads {
            // Point reads that never suspend: answered as the request arrives (see `registerSync`).
            router.registerSync(IdentityAPI.getUser) { request, _ in try Self.getUser(request, user: reads.userNow(id:)) }
            router.registerSync(IdentityAPI.claimsForSession) { request, _ in try Self.claimsForSession(request, user: reads.userNow(id:)) }
        } else {
            router.register(IdentityAPI.getUser) { request, _ in try await getUser(request) }
            router.register(IdentityAPI.claimsForSession) { request, _ in try await claimsForSession(request) }
        }
        router.registerSync(IdentityAPI.passwordStrength) { request, _ in passwordStrength(request) }
        router.registerSync(IdentityAPI.stats) { _, _ in stats() }
        return router
    }

    /// `getUser` over a synchronous point read.
    static func getUser(_ request: UserIDRequest, user: (UserID) throws -> UserRecord?) throws -> User {
        let id = try validID(request.userID)
        guard let found = try user(id) else { throw IdentityError.userNotFound }
        return User(found)
    }

    /// `claimsForSession` over a synchronous point read.
    static func claimsForSession(_ request: ClaimsForSessionRequest, user: (UserID) throws -> UserRecord?) throws -> UserClaims {
        guard UserID.isWellFormed(request.userID), let found = try user(UserID(request.userID)) else { return UserClaims(exists: false) }
        return found.claims
    }

    // MARK: Methods

    /// The hashing pool's state (`identity.stats`).
    public func stats() -> IdentityStats {
        let pool = hasher.pool.snapshot
        return IdentityStats(
            hashWorkers: Int32(hasher.pool.workers), hashBusyWorkers: Int32(pool.running), hashQueueDepth: Int32(pool.queued),
            hashQueueLimit: Int32(hasher.pool.queueLimit), hashCompleted: Int64(pool.completed), hashRejected: Int64(pool.rejected))
            .withMail(outboxMetrics.snapshot)
    }

    /// When the password hash must be done for a call that must answer by `deadline`: a tenth of
    /// the time left (at most 100 ms) stays for what follows it (a write and the session).
    static func hashDeadline(_ deadline: ContinuousClock.Instant?, now: ContinuousClock.Instant = .now) -> ContinuousClock.Instant? {
        guard let deadline else { return nil }
        return deadline - max(.zero, min(.milliseconds(100), (deadline - now) / 10))
    }

    /// Creates a user, then asks the token service for a session. With a `deadline` (the RPC
    /// caller's), a hash that could not be done in time is refused as `overloaded` at once, and
    /// the token service gets what is left of it.
    public func signUp(_ request: SignUpRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        try await audited(AuditEvent.Kind.signUp, client: request.client) {
            try await signUpAudited(request, deadline: deadline)
        }
    }

    private func signUpAudited(_ request: SignUpRequest, deadline: ContinuousClock.Instant?) async throws -> AuthResponse {
        let email = try EmailAddress(request.email)
        auditEmail(email)
        let displayName = try Self.validDisplayName(request.displayName)
        try Self.checkClient(request.client)
        try Self.checkLocale(request.locale)
        let password = try policy.validate(request.password, email: email.normalized)
        // Cheap early answer for a taken email (the insert still decides under races).
        if try await store.user(normalizedEmail: email.normalized) != nil { throw IdentityError.emailExists }
        let hash = try await hasher.hash(password, deadline: Self.hashDeadline(deadline))
        let at = clock.now
        let verifyFirst = emailFlows.verification == .required
        let user = UserRecord(
            id: .random(), email: email, displayName: displayName, passwordHash: hash, settingsJSON: defaultSettingsJSON,
            createdAt: at, lastSignInAt: verifyFirst ? nil : at)
        auditUser(user.id)
        try await insertSigningUp(user, email: email, locale: request.locale)
        await publish(IdentityAPI.Topic.userCreated, user)
        if verifyFirst { return .verificationRequired(user: User(user)) }  // no session until verified
        let tokens = try await issueSession(for: user, at: at, client: request.client, deadline: deadline)
        return AuthResponse(user: User(user), tokens: tokens)
    }

    /// Creates an anonymous user (no email, no password) and a session for it (`amr: ["anon"]`,
    /// the access token carrying `is_anonymous`). Rate-limited per client address at the gateway.
    public func signInAnonymously(_ request: SignInAnonymouslyRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        try Self.checkClient(request.client)
        let at = clock.now
        let user = UserRecord(
            id: .random(), email: nil, isAnonymous: true, settingsJSON: defaultSettingsJSON, createdAt: at, lastSignInAt: at)
        try await audited(AuditEvent.Kind.signUpAnonymous, userID: user.id.rawValue, client: request.client) {
            try await store.insert(user)
        }
        await publish(IdentityAPI.Topic.userCreated, user)
        let tokens = try await issueSession(for: user, at: at, client: request.client, amr: ["anon"], deadline: deadline)
        return AuthResponse(user: User(user), tokens: tokens)
    }

    /// Verifies email and password, upgrades an outdated hash, then asks for a session (with what
    /// is left of `deadline`, the RPC caller's, when given).
    /// An unknown email costs one hash too, so timing does not reveal whether it exists; both are
    /// counted by `throttle` and `accountThrottle` before the user is looked up, so both are
    /// throttled alike.
    public func signIn(_ request: SignInRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        try await audited(AuditEvent.Kind.signIn, failure: AuditEvent.Kind.signInFailed, client: request.client) {
            try await signInAudited(request, deadline: deadline)
        }
    }

    private func signInAudited(_ request: SignInRequest, deadline: ContinuousClock.Instant?) async throws -> AuthResponse {
        let hashDeadline = Self.hashDeadline(deadline)
        let email = try EmailAddress(request.email)
        auditEmail(email)
        try Self.checkClient(request.client)
        if let caller = request.caller, let anonymous = try await anonymousCaller(caller) {
            return try await signIn(request, email: email, from: anonymous, deadline: deadline)
        }
        let (user, stored, password) = try await checkPasswordThrottled(
            request.password, email: email, client: request.client, deadline: hashDeadline)
        guard !user.disabled else { throw IdentityError.userDisabled }
        try requireVerifiedEmail(user)
        let (signedIn, tokens) = try await completeSignIn(
            user, verified: stored, password: password, client: request.client, hashDeadline: hashDeadline, deadline: deadline)
        return AuthResponse(user: User(signedIn), tokens: tokens)
    }

    /// The user whose email and password these are, its stored hash and the password as
    /// normalized; `invalidCredentials` for an unknown email or a wrong password alike (after
    /// `unknownEmail` is called for the first, at the same cost).
    func checkPassword(
        _ typed: String, email: EmailAddress, deadline hashDeadline: ContinuousClock.Instant?, unknownEmail: () -> Void = {}
    ) async throws -> (UserRecord, String, String) {
        if typed.isEmpty || policy.isObviouslyTooLong(typed) { throw IdentityError.invalidCredentials }
        let password = PasswordPolicy.normalize(typed)
        guard password.unicodeScalars.count <= policy.maxLength else { throw IdentityError.invalidCredentials }
        let found = try await store.user(normalizedEmail: email.normalized)
        if let found { auditUser(found.id) }
        guard let user = found, let stored = user.passwordHash else {
            _ = try await hasher.verifyDummy(password, deadline: hashDeadline)
            if found == nil { unknownEmail() }
            throw IdentityError.invalidCredentials
        }
        var matched = try await hasher.verify(password, against: stored, deadline: hashDeadline)
        if !matched, password != typed, !stored.hasPrefix("$argon2id$") {
            // An imported hash may have been made from the password as typed, before NFKC.
            matched = try await hasher.verify(typed, against: stored, deadline: hashDeadline)
        }
        guard matched else { throw IdentityError.invalidCredentials }
        return (user, stored, password)
    }

    /// The user with this id (`identity.getUser`).
    public func getUser(_ request: UserIDRequest) async throws -> User {
        let id = try Self.validID(request.userID)
        let found = try await store.user(id: id)
        return try Self.getUser(request) { _ in found }
    }


    /// Changes display name, photo URL and settings (replaced by `settingsJSON`, or merged with
    /// the RFC 7396 patch `settingsPatchJSON` inside the store's transaction); with
    /// `expectedVersion`, only if nobody else changed the user since.
    public func updateProfile(_ request: UpdateProfileRequest) async throws -> User {
        let id = try Self.validID(request.userID)
        let displayName = try request.displayName.map { try Self.validDisplayName($0) }
        let photoURL = try request.photoURL.map { try Self.validPhotoURL($0) }
        let settings = try request.settingsJSON.map { try Self.validSettings($0) }
        let patch = try Self.validSettingsPatch(request.settingsPatchJSON, replacing: settings)
        if let v = request.expectedVersion, v < 1 {
            throw IdentityError.invalidArgument(field: "expectedVersion", reason: "must be 1 or more")
        }
        let user = try await store.update(id: id, expectedVersion: request.expectedVersion, now: clock.now) { user in
            if let displayName { user.displayName = displayName }
            if let photoURL { user.photoURL = photoURL }
            if let settings { user.settingsJSON = settings }
            if let patch { user.settingsJSON = try SettingsDocument.merged(patch, into: user.settingsJSON) }
        }
        await publish(IdentityAPI.Topic.userUpdated, user)
        return User(user)
    }

    /// Revokes every session of `id` in the token service (`token.revokeAllSessions`, idempotent).
    func revokeSessions(of id: UserID, reason: String) async throws {
        _ = try await tokens.call(TokenAPI.revokeAllSessions, UserSessionsRequest(userID: id.rawValue, reason: reason))
    }

    /// The claims the token service needs at refresh; `exists = false` for an unknown user.
    public func claimsForSession(_ request: ClaimsForSessionRequest) async throws -> UserClaims {
        let found = UserID.isWellFormed(request.userID) ? try await store.user(id: UserID(request.userID)) : nil
        return try Self.claimsForSession(request) { _ in found }
    }

    /// A strength score and whether the policy would accept the password (`identity.passwordStrength`).
    public func passwordStrength(_ request: PasswordStrengthRequest) -> PasswordStrengthResponse {
        let email = EmailAddress.normalize(request.email)
        let inputs = [email, String(request.displayName.prefix(256))].compactMap { $0 }
        let estimate = PasswordStrength.estimate(request.password, userInputs: inputs, maxLength: policy.maxLength)
        let violations = policy.violations(of: request.password, email: email)
        let score = violations.isEmpty ? estimate.score : min(estimate.score, 1)
        return PasswordStrengthResponse(
            score: Int32(score), reasons: estimate.reasons.map { StrengthReason(code: $0.code, message: $0.message) },
            acceptable: violations.isEmpty, violations: violations.map(\.rawValue),
            level: PasswordStrength.Level(score: score, acceptable: violations.isEmpty).rawValue)
    }

    // MARK: Helpers

    /// Asks the token service for a session with what is left of the caller's `deadline` (the
    /// token client's default timeout without one).
    func issueSession(
        for user: UserRecord, at: Date, client: ClientInfo, amr: [String] = ["pwd"], deadline: ContinuousClock.Instant?
    ) async throws -> SessionTokens {
        let request = IssueSessionRequest(
            userID: user.id.rawValue, claims: user.claims, amr: amr, authTime: at, client: client)
        return try await tokens.call(ServiceContracts.issueSession, request, deadline: deadline)
    }

    func publish(_ topic: String, _ user: UserRecord) async {
        await publish(topic, UserEvent(userID: user.id.rawValue, version: user.version, occurredAt: user.updatedAt))
    }

    func publish(_ topic: String, _ event: UserEvent) async {
        do {
            await events.publish(topic: topic, payload: try ProtobufEncoder().encode(event))
        } catch {
            logger.warning("event \(topic) does not encode: \(error)")
        }
    }

    static func validID(_ text: String) throws -> UserID {
        guard UserID.isWellFormed(text) else {
            throw IdentityError.invalidArgument(field: "userID", reason: "not a user id")
        }
        return UserID(text)
    }

    /// nil stays nil; "" (after trimming) becomes nil: no name.
    static func validDisplayName(_ name: String?) throws -> String? {
        guard let name else { return nil }
        guard name.utf8.count <= maxDisplayNameLength * 4 else {
            throw IdentityError.invalidArgument(field: "displayName", reason: "longer than \(maxDisplayNameLength) characters")
        }
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.unicodeScalars.count <= maxDisplayNameLength else {
            throw IdentityError.invalidArgument(field: "displayName", reason: "longer than \(maxDisplayNameLength) characters")
        }
        guard !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == "\u{FFFD}" }) else {
            throw IdentityError.invalidArgument(field: "displayName", reason: "contains a control character")
        }
        return trimmed.isEmpty ? nil : trimmed
    }

    /// The gateway truncates the user agent to 512 bytes; an IP address is at most 45 characters.
    static func checkClient(_ client: ClientInfo) throws {
        guard client.userAgent.utf8.count <= 512 else {
            throw IdentityError.invalidArgument(field: "client.userAgent", reason: "longer than 512 bytes")
        }
        guard client.ip.utf8.count <= 45, client.ip.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw IdentityError.invalidArgument(field: "client.ip", reason: "not an IP address")
        }
    }

    static func validPhotoURL(_ text: String) throws -> String? {
        if text.isEmpty { return nil }
        let invalid = IdentityError.invalidArgument(field: "photoURL", reason: "must be an http(s) URL of at most \(maxPhotoURLLength) characters")
        guard text.utf8.count <= maxPhotoURLLength,
            !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F || $0 == "\u{FFFD}" }),
            let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else { throw invalid }
        return text
    }

    /// A replacing settings document, checked by the rules a later merge patch reads it with
    /// (`SettingsDocument.validated`: `JSONTree`'s grammar and nesting limit, 16 KiB).
    static func validSettings(_ text: String) throws -> String {
        try SettingsDocument.validated(text, field: "settingsJSON")
    }
}
