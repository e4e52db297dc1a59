import Foundation

// Wire messages of the identity service. Field numbers are the CodingKey values and match
// proto/identity.proto field for field. proto3: an Optional is absent when nil.

/// A user as clients see it (`gatehouse.identity.v1.User`).
public struct User: Codable, Sendable, Hashable {
    public var id: String
    public var email: String
    public var emailVerified: Bool
    /// "" when unset.
    public var displayName: String
    /// "" when unset.
    public var photoURL: String
    public var isAnonymous: Bool
    public var createdAt: Date
    public var lastSignInAt: Date?
    /// The user's settings, a JSON object.
    public var settingsJSON: String
    public var version: Int64
    public var disabled: Bool

    public init(
        id: String, email: String = "", emailVerified: Bool = false, displayName: String = "", photoURL: String = "",
        isAnonymous: Bool = false, createdAt: Date, lastSignInAt: Date? = nil, settingsJSON: String = "{}",
        version: Int64 = 1, disabled: Bool = false
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
    }

    enum CodingKeys: Int, CodingKey {
        case id = 1, email = 2, emailVerified = 3, displayName = 4, photoURL = 5, isAnonymous = 6
        case createdAt = 7, lastSignInAt = 8, settingsJSON = 9, version = 10, disabled = 11
    }
}

/// `identity.signUp` request.
public struct SignUpRequest: Codable, Sendable, Hashable {
    public var email: String
    public var password: String
    public var displayName: String?
    public var client: ClientInfo

    public init(email: String, password: String, displayName: String? = nil, client: ClientInfo = ClientInfo()) {
        self.email = email
        self.password = password
        self.displayName = displayName
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case email = 1, password = 2, displayName = 3, client = 4 }
}

/// `identity.signIn` request.
public struct SignInRequest: Codable, Sendable, Hashable {
    public var email: String
    public var password: String
    public var client: ClientInfo

    public init(email: String, password: String, client: ClientInfo = ClientInfo()) {
        self.email = email
        self.password = password
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case email = 1, password = 2, client = 3 }
}

/// `identity.signUp` / `identity.signIn` reply: the user and a new session.
public struct AuthResponse: Codable, Sendable, Hashable {
    public var user: User
    public var tokens: SessionTokens
    public init(user: User, tokens: SessionTokens) {
        self.user = user
        self.tokens = tokens
    }
    enum CodingKeys: Int, CodingKey { case user = 1, tokens = 2 }
}

/// A request naming one user (`getUser`, `deleteUser`).
public struct UserIDRequest: Codable, Sendable, Hashable {
    public var userID: String
    public init(userID: String) { self.userID = userID }
    enum CodingKeys: Int, CodingKey { case userID = 1 }
}

/// `identity.updateProfile` request. A nil field is left unchanged; "" clears `displayName`
/// or `photoURL`.
public struct UpdateProfileRequest: Codable, Sendable, Hashable {
    public var userID: String
    public var displayName: String?
    public var photoURL: String?
    /// A JSON object, at most 16 KiB; replaces the stored settings.
    public var settingsJSON: String?
    /// When set, the update applies only if the stored version is this one (`version_conflict` otherwise).
    public var expectedVersion: Int64?

    public init(
        userID: String, displayName: String? = nil, photoURL: String? = nil, settingsJSON: String? = nil,
        expectedVersion: Int64? = nil
    ) {
        self.userID = userID
        self.displayName = displayName
        self.photoURL = photoURL
        self.settingsJSON = settingsJSON
        self.expectedVersion = expectedVersion
    }

    enum CodingKeys: Int, CodingKey {
        case userID = 1, displayName = 2, photoURL = 3, settingsJSON = 4, expectedVersion = 5
    }
}

/// `identity.setDisabled` request (administrative).
public struct SetDisabledRequest: Codable, Sendable, Hashable {
    public var userID: String
    public var disabled: Bool
    public init(userID: String, disabled: Bool) {
        self.userID = userID
        self.disabled = disabled
    }
    enum CodingKeys: Int, CodingKey { case userID = 1, disabled = 2 }
}

/// `identity.passwordStrength` request.
public struct PasswordStrengthRequest: Codable, Sendable, Hashable {
    public var password: String
    /// Optional context: the user's email and name make passwords containing them weaker.
    public var email: String
    public var displayName: String
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
    public var reasons: [StrengthReason]
    /// Whether sign-up would accept the password (the policy, not the score).
    public var acceptable: Bool
    /// The policy violations (`weak_password` reasons) when not acceptable.
    public var violations: [String]
    public init(score: Int32, reasons: [StrengthReason], acceptable: Bool, violations: [String]) {
        self.score = score
        self.reasons = reasons
        self.acceptable = acceptable
        self.violations = violations
    }
    enum CodingKeys: Int, CodingKey { case score = 1, reasons = 2, acceptable = 3, violations = 4 }
}

/// The payload of `user.created`, `user.updated`, `user.deleted` and `user.disabled` events.
public struct UserEvent: Codable, Sendable, Hashable {
    public var userID: String
    /// The user's version after the change (0 for `user.deleted`).
    public var version: Int64
    public var occurredAt: Date
    public init(userID: String, version: Int64, occurredAt: Date) {
        self.userID = userID
        self.version = version
        self.occurredAt = occurredAt
    }
    enum CodingKeys: Int, CodingKey { case userID = 1, version = 2, occurredAt = 3 }
}

/// `identity.stats` reply: the password-hashing pool's state, for metrics (`/metrics` on the gateway).
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
    }
}

/// The identity service's methods.
public enum IdentityAPI {
    /// Creates a user with an email and password, then a session.
    public static let signUp = RPCMethod<SignUpRequest, AuthResponse>(name: "identity.signUp")
    /// Verifies an email and password, then creates a session.
    public static let signIn = RPCMethod<SignInRequest, AuthResponse>(name: "identity.signIn")
    public static let getUser = RPCMethod<UserIDRequest, User>(name: "identity.getUser", idempotent: true)
    public static let updateProfile = RPCMethod<UpdateProfileRequest, User>(name: "identity.updateProfile")
    public static let deleteUser = RPCMethod<UserIDRequest, Empty>(name: "identity.deleteUser")
    public static let setDisabled = RPCMethod<SetDisabledRequest, User>(name: "identity.setDisabled", idempotent: true)
    public static let passwordStrength = RPCMethod<PasswordStrengthRequest, PasswordStrengthResponse>(
        name: "identity.passwordStrength", idempotent: true)
    /// The hashing pool's state, for metrics. Cheap: answered without touching the database.
    public static let stats = RPCMethod<Empty, IdentityStats>(name: "identity.stats", idempotent: true)
    /// Shared with the token service (`ServiceContracts.claimsForSession`).
    public static let claimsForSession = ServiceContracts.claimsForSession

    /// Event topics on the PUB socket.
    public enum Topic {
        public static let userCreated = "user.created"
        public static let userUpdated = "user.updated"
        public static let userDeleted = "user.deleted"
        public static let userDisabled = "user.disabled"
    }
}
