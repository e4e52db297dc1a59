import Foundation

// Wire messages of the identity service. Field numbers are the CodingKey values and match
// proto/identity.proto field for field. proto3: an Optional is absent when nil.

/// A user as clients see it (`gatehouse.identity.v1.User`).
public struct User: Codable, Sendable, Hashable {
    /// The user's id: 128 random bits, base64url, 22 characters.
    public var id: String
    /// The address as the user typed it (trimmed); "" for an anonymous user.
    public var email: String
    /// Whether the user proved they own `email`.
    public var emailVerified: Bool
    /// "" when unset.
    public var displayName: String
    /// "" when unset.
    public var photoURL: String
    /// Whether the user is anonymous; such a user has no email address.
    public var isAnonymous: Bool
    /// When the user was created.
    public var createdAt: Date
    /// The user's last successful sign-in (sign-up counts as one); nil: never.
    public var lastSignInAt: Date?
    /// The user's settings, a JSON object.
    public var settingsJSON: String
    /// 1 at creation, then +1 per change;
    /// `UpdateProfileRequest.expectedVersion` is compared with it.
    public var version: Int64
    /// Whether the user is disabled: sign-in then fails with
    /// `user_disabled`, and disabling revoked its sessions.
    public var disabled: Bool
    /// How the user can sign in, sorted: `password`, and linked providers (`apple.com`,
    /// `google.com`, ...); empty for an anonymous user.
    public var providers: [String]

    /// A user; fields not given take a new user's values (no email, empty settings, version 1).
    public init(
        id: String, email: String = "", emailVerified: Bool = false, displayName: String = "", photoURL: String = "",
        isAnonymous: Bool = false, createdAt: Date, lastSignInAt: Date? = nil, settingsJSON: String = "{}",
        version: Int64 = 1, disabled: Bool = false, providers: [String] = []
    ) {
        self.id = id
        self.email = email
        self.emailVerified = emailVerified
        self.displayName = displayName
        self.photoURL = photoURL
        self.isAnonymous = isAnonymous
        self.createdAt = createdAt
        self.lastSignInAt = lastSignInAt
        self.settingsJSON = settingsJSON
        self.version = version
        self.disabled = disabled
        self.providers = providers
    }

    enum CodingKeys: Int, CodingKey {
        case id = 1, email = 2, emailVerified = 3, displayName = 4, photoURL = 5, isAnonymous = 6
        case createdAt = 7, lastSignInAt = 8, settingsJSON = 9, version = 10, disabled = 11, providers = 12
    }
}

/// `identity.signUp` request.
public struct SignUpRequest: Codable, Sendable, Hashable {
    /// The new user's email address; refused with `invalid_email` or `email_exists`.
    public var email: String
    /// The new user's password; refused with `weak_password` when the policy does not accept it.
    public var password: String
    /// The new user's display name (at most 256 characters,
    /// no control characters); nil or "": none.
    public var displayName: String?
    /// The client signing up, stored with the new session.
    public var client: ClientInfo
    /// The languages of the verification mail (`ja,en`: the gateway's `Accept-Language`
    /// preference list), when sign-up mails one (`GATEHOUSE_EMAIL_VERIFICATION` send or required).
    public var locale: String

    /// A sign-up with no display name and an unknown client unless given.
    public init(email: String, password: String, displayName: String? = nil, client: ClientInfo = ClientInfo(), locale: String = "en") {
        self.email = email
        self.password = password
        self.displayName = displayName
        self.client = client
        self.locale = locale
    }

    enum CodingKeys: Int, CodingKey { case email = 1, password = 2, displayName = 3, client = 4, locale = 5 }
}

/// `identity.signInAnonymously` request.
public struct SignInAnonymouslyRequest: Codable, Sendable, Hashable {
    /// The client starting anonymously, stored with the new session.
    public var client: ClientInfo

    /// A request from `client` (unknown unless given).
    public init(client: ClientInfo = ClientInfo()) { self.client = client }

    enum CodingKeys: Int, CodingKey { case client = 1 }
}

/// `identity.signIn` request.
public struct SignInRequest: Codable, Sendable, Hashable {
    /// The user's email address, compared case-insensitively.
    public var email: String
    /// The password to verify against the user's stored hash.
    public var password: String
    /// The client signing in, stored with the new session.
    public var client: ClientInfo
    /// The signed-in caller, when the request carried a bearer token. An anonymous caller signing
    /// in to an existing account migrates (see `allowMigration`); any other caller is ignored.
    public var caller: AuthenticatedCaller?
    /// An anonymous caller's migration decision: nil answers `migration_required` with a resume
    /// handle; true or false deletes the anonymous user and signs in (`AuthResponse.migration`).
    public var allowMigration: Bool?

    /// A sign-in from an unknown client unless `client` is given, by no caller unless given.
    public init(
        email: String, password: String, client: ClientInfo = ClientInfo(), caller: AuthenticatedCaller? = nil,
        allowMigration: Bool? = nil
    ) {
        self.email = email
        self.password = password
        self.client = client
        self.caller = caller
        self.allowMigration = allowMigration
    }

    enum CodingKeys: Int, CodingKey { case email = 1, password = 2, client = 3, caller = 4, allowMigration = 5 }
}

/// `identity.signUp` / `identity.signIn` reply: the user and a new session.
public struct AuthResponse: Codable, Sendable, Hashable {
    /// The user signed up or in.
    public var user: User
    /// The new session's tokens; empty (no session: `hasSession` is false) when
    /// `verificationRequired`.
    public var tokens: SessionTokens
    /// Set when an anonymous user was migrated to `user` (and deleted) by this sign-in.
    public var migration: MigrationOutcome?
    /// True for a sign-up under `GATEHOUSE_EMAIL_VERIFICATION=required`: the user exists and a
    /// verification mail is queued, but no session was issued (`tokens` is empty) until the
    /// address is verified and the user signs in.
    public var verificationRequired: Bool
    /// A reply with the user and their new session (and the migration that led to it, if any).
    public init(user: User, tokens: SessionTokens, migration: MigrationOutcome? = nil, verificationRequired: Bool = false) {
        self.user = user
        self.tokens = tokens
        self.migration = migration
        self.verificationRequired = verificationRequired
    }
    /// Whether the reply carries a session (false for a sign-up that must verify its address first).
    public var hasSession: Bool { !verificationRequired }
    enum CodingKeys: Int, CodingKey { case user = 1, tokens = 2, migration = 3, verificationRequired = 4 }

    /// A sign-up's reply without a session: the address must be verified first.
    public static func verificationRequired(user: User) -> AuthResponse {
        AuthResponse(
            user: user, tokens: SessionTokens(accessToken: "", refreshToken: "", tokenType: "", expiresIn: 0, sessionID: ""),
            verificationRequired: true)
    }
}

/// A request naming one user (`getUser`, `deleteUser`).
public struct UserIDRequest: Codable, Sendable, Hashable {
    /// The user's id (`User.id`); a malformed one is `invalid_argument`.
    public var userID: String
    /// A request naming the user `userID`.
    public init(userID: String) { self.userID = userID }
    enum CodingKeys: Int, CodingKey { case userID = 1 }
}

/// `identity.updateProfile` request. A nil field is left unchanged; "" clears `displayName`
/// or `photoURL`.
public struct UpdateProfileRequest: Codable, Sendable, Hashable {
    /// The user to change.
    public var userID: String
    /// The new display name (at most 256 characters, no control characters).
    public var displayName: String?
    /// The new photo URL: http(s), at most 2,048 characters.
    public var photoURL: String?
    /// A JSON object, at most 16 KiB; replaces the stored settings.
    public var settingsJSON: String?
    /// When set, the update applies only if the stored version is this one (`version_conflict` otherwise).
    public var expectedVersion: Int64?
    /// A JSON merge patch (RFC 7396, a JSON object) applied to the stored settings in the
    /// update's transaction; a result over 16 KiB is `invalid_argument` and nothing is written.
    /// Not together with `settingsJSON`.
    public var settingsPatchJSON: String?

    /// A change of `userID`'s profile; fields not given stay as they are.
    public init(
        userID: String, displayName: String? = nil, photoURL: String? = nil, settingsJSON: String? = nil,
        expectedVersion: Int64? = nil, settingsPatchJSON: String? = nil
    ) {
        self.userID = userID
        self.displayName = displayName
        self.photoURL = photoURL
        self.settingsJSON = settingsJSON
        self.expectedVersion = expectedVersion
        self.settingsPatchJSON = settingsPatchJSON
    }

    enum CodingKeys: Int, CodingKey {
        case userID = 1, displayName = 2, photoURL = 3, settingsJSON = 4, expectedVersion = 5, settingsPatchJSON = 6
    }
}

/// `identity.setDisabled` request (administrative).
public struct SetDisabledRequest: Codable, Sendable, Hashable {
    /// The user to disable or enable.
    public var userID: String
    /// True disables the user, false enables them again.
    public var disabled: Bool
    /// A request to set `userID`'s disabled state.
    public init(userID: String, disabled: Bool) {
        self.userID = userID
        self.disabled = disabled
    }
    enum CodingKeys: Int, CodingKey { case userID = 1, disabled = 2 }
}

/// `identity.passwordStrength` request.
public struct PasswordStrengthRequest: Codable, Sendable, Hashable {
    /// The password to rate.
    public var password: String
    /// Optional context: the user's email and name make passwords containing them weaker.
    public var email: String
    /// Optional context, like `email`: "" when unknown.
    public var displayName: String
    /// A request to rate `password`, with the user's email and name as context when known.
    public init(password: String, email: String = "", displayName: String = "") {
        self.password = password
        self.email = email
        self.displayName = displayName
    }
    enum CodingKeys: Int, CodingKey { case password = 1, email = 2, displayName = 3 }
}

/// One reason behind a strength score.
public struct StrengthReason: Codable, Sendable, Hashable {
    /// Stable code, e.g. `common_password`, `short`, `sequence`.
    public var code: String
    /// English text a client may show.
    public var message: String
    /// A reason with its stable code and English text.
    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }
    enum CodingKeys: Int, CodingKey { case code = 1, message = 2 }
}

/// `identity.passwordStrength` reply.
public struct PasswordStrengthResponse: Codable, Sendable, Hashable {
    /// 0 (guessable) … 4 (very strong).
    public var score: Int32
    /// Why the score is what it is.
    public var reasons: [StrengthReason]
    /// Whether sign-up would accept the password (the policy, not the score).
    public var acceptable: Bool
    /// The policy violations (`weak_password` reasons) when not acceptable.
    public var violations: [String]
    /// `weak`, `medium` or `strong`, for a three-level meter: `weak` when not acceptable or
    /// score 0–1, `medium` for 2–3, `strong` for 4.
    public var level: String
    /// A strength reply.
    public init(score: Int32, reasons: [StrengthReason], acceptable: Bool, violations: [String], level: String = "") {
        self.score = score
        self.reasons = reasons
        self.acceptable = acceptable
        self.violations = violations
        self.level = level
    }
    enum CodingKeys: Int, CodingKey { case score = 1, reasons = 2, acceptable = 3, violations = 4, level = 5 }
}

/// The payload of `user.created`, `user.updated`, `user.deleted` and `user.disabled` events.
public struct UserEvent: Codable, Sendable, Hashable {
    /// The user who changed.
    public var userID: String
    /// The user's version after the change (0 for `user.deleted`).
    public var version: Int64
    /// When the change happened.
    public var occurredAt: Date
    /// An event about `userID` at `version`.
    public init(userID: String, version: Int64, occurredAt: Date) {
        self.userID = userID
        self.version = version
        self.occurredAt = occurredAt
    }
    enum CodingKeys: Int, CodingKey { case userID = 1, version = 2, occurredAt = 3 }
}

/// `identity.stats` reply: the password-hashing pool's state and the mail outbox's figures, for
/// metrics (`/metrics` on the gateway).
public struct IdentityStats: Codable, Sendable, Hashable {
    /// Hashing threads.
    public var hashWorkers: Int32
    /// Threads running a hash now.
    public var hashBusyWorkers: Int32
    /// Hash jobs waiting for a thread.
    public var hashQueueDepth: Int32
    /// The most jobs allowed to wait; past it callers get `overloaded`.
    public var hashQueueLimit: Int32
    /// Hash jobs finished since the service started.
    public var hashCompleted: Int64
    /// Hash jobs refused with `overloaded` since the service started.
    public var hashRejected: Int64
    /// Mails waiting in the outbox, as of the delivery worker's last pass.
    public var mailQueued: Int64 = 0
    /// Mails delivered since the service started.
    public var mailSent: Int64 = 0
    /// Failed mail deliveries scheduled again since the service started.
    public var mailRetried: Int64 = 0
    /// Mails given up on (dead-lettered) since the service started.
    public var mailDead: Int64 = 0
    /// The sum of the delivered mails' times from enqueue to delivery, in milliseconds.
    public var mailDeliveryLatencyMsSum: Int64 = 0
    /// Delivered mails per bucket of their time from enqueue to delivery: one count per bound of
    /// `mailDeliveryBucketBounds` (a time at most that bound and above the one before), then one
    /// for longer times; not cumulative. Empty from a service that does not count them.
    public var mailDeliverySecondsBuckets: [Int64] = []

    /// The bucket bounds of `mailDeliverySecondsBuckets`, in seconds (`gatehouse_mail_delivery_seconds`).
    public static let mailDeliveryBucketBounds: [Double] = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    /// A snapshot of the pool's counters; zero for what is not given.
    public init(
        hashWorkers: Int32 = 0, hashBusyWorkers: Int32 = 0, hashQueueDepth: Int32 = 0, hashQueueLimit: Int32 = 0,
        hashCompleted: Int64 = 0, hashRejected: Int64 = 0
    ) {
        self.hashWorkers = hashWorkers
        self.hashBusyWorkers = hashBusyWorkers
        self.hashQueueDepth = hashQueueDepth
        self.hashQueueLimit = hashQueueLimit
        self.hashCompleted = hashCompleted
        self.hashRejected = hashRejected
    }

    enum CodingKeys: Int, CodingKey {
        case hashWorkers = 1, hashBusyWorkers = 2, hashQueueDepth = 3, hashQueueLimit = 4, hashCompleted = 5, hashRejected = 6
        case mailQueued = 7, mailSent = 8, mailRetried = 9, mailDead = 10, mailDeliveryLatencyMsSum = 11
        case mailDeliverySecondsBuckets = 12
    }
}

/// The identity service's methods.
public enum IdentityAPI {
    /// Creates a user with an email and password, then a session.
    public static let signUp = RPCMethod<SignUpRequest, AuthResponse>(name: "identity.signUp", callers: [.gateway])
    /// Verifies an email and password, then creates a session.
    public static let signIn = RPCMethod<SignInRequest, AuthResponse>(name: "identity.signIn", callers: [.gateway])
    /// Creates an anonymous user (no email or password) and a session for it.
    public static let signInAnonymously = RPCMethod<SignInAnonymouslyRequest, AuthResponse>(
        name: "identity.signInAnonymously", callers: [.gateway])
    /// A user by id. Errors: `invalid_argument`, `user_not_found`. Idempotent.
    public static let getUser = RPCMethod<UserIDRequest, User>(name: "identity.getUser", idempotent: true, callers: [.gateway])
    /// Changes display name, photo URL or settings, optionally
    /// only at an expected version (`version_conflict`).
    public static let updateProfile = RPCMethod<UpdateProfileRequest, User>(name: "identity.updateProfile", callers: [.gateway])
    /// Deletes a user and its linked identities. Errors: `invalid_argument`, `user_not_found`.
    public static let deleteUser = RPCMethod<UserIDRequest, Empty>(name: "identity.deleteUser")
    /// Disables or enables a user (administrative). Idempotent.
    public static let setDisabled = RPCMethod<SetDisabledRequest, User>(name: "identity.setDisabled", idempotent: true)
    /// A strength score for password meters, and whether the policy would accept the password.
    public static let passwordStrength = RPCMethod<PasswordStrengthRequest, PasswordStrengthResponse>(
        name: "identity.passwordStrength", idempotent: true, callers: [.gateway])
    /// The hashing pool's state, for metrics. Cheap: answered without touching the database.
    public static let stats = RPCMethod<Empty, IdentityStats>(name: "identity.stats", idempotent: true, callers: [.gateway])
    /// Upgrades the calling anonymous user in place: email and password, same id
    /// (`IdentityAPI+Migration.swift`).
    public static let upgradeAnonymous = RPCMethod<UpgradeAnonymousRequest, AuthResponse>(
        name: "identity.upgradeAnonymous", callers: [.gateway])
    /// Resumes an anonymous caller's sign-in after `migration_required`, with its handle and decision.
    public static let resumeSignIn = RPCMethod<ResumeSignInRequest, AuthResponse>(name: "identity.resumeSignIn", callers: [.gateway])
    /// Shared with the token service (`ServiceContracts.claimsForSession`).
    public static let claimsForSession = ServiceContracts.claimsForSession

    /// Event topics on the PUB socket.
    public enum Topic {
        /// Published after sign-up created a user.
        public static let userCreated = "user.created"
        /// Published after a profile change, and when a user is enabled again.
        public static let userUpdated = "user.updated"
        /// Published after a user was deleted (`UserEvent.version` 0).
        public static let userDeleted = "user.deleted"
        /// Published after a user was disabled.
        public static let userDisabled = "user.disabled"
    }
}
