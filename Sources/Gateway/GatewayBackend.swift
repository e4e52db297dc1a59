import Foundation
public import GatehouseContracts
/// What the gateway needs from the identity and token services. The gateway holds no user data:
/// every request becomes one call here. The production implementation is an RPC adapter over
/// ZeroMQ; tests use an in-memory implementation.
///
/// Every failure is thrown as an `RPCError` with a stable code (`email_exists`,
/// `invalid_credentials`, `weak_password`, `unavailable`, …). Any other error is treated as
/// `internal`.
public protocol GatewayBackend: Sendable {
    /// Creates a user with a password and opens a session for it.
    func signUp(email: String, password: String, displayName: String?, client: ClientInfo) async throws -> (UserView, SessionTokens)
    /// Checks a password and opens a session. Unknown email and wrong password both throw `invalid_credentials`.
    func signIn(email: String, password: String, client: ClientInfo) async throws -> (UserView, SessionTokens)
    /// Rotates a refresh token.
    func refresh(refreshToken: String, client: ClientInfo) async throws -> SessionTokens
    /// Revokes one session (the `sid` claim).
    func revokeSession(sessionID: String) async throws
    /// Revokes every session of a user (the `sub` claim).
    func revokeAllSessions(userID: String) async throws
    /// The user with this id.
    func getUser(id: String) async throws -> UserView
    /// Changes profile fields; `nil` leaves a field unchanged. `settingsJSON` is a JSON object.
    func updateProfile(id: String, displayName: String?, photoURL: String?, settingsJSON: String?) async throws -> UserView
    /// A strength estimate for a password, for clients that show a meter.
    func passwordStrength(password: String) async throws -> PasswordStrengthView
    /// The token service's JWKS document (JSON text).
    func jwks() async throws -> String
    /// True when the identity and token services answer.
    func ready() async -> Bool
    /// Session ids revoked by the token service (its `session.revoked` feed). Best effort: the
    /// gateway resubscribes when a stream ends.
    func revocations() -> AsyncStream<String>
    /// The identity service's password-hashing pool, for `/metrics`; nil when it does not answer.
    func hashPoolStats() async -> HashPoolStats?
    /// True when every call already fails with `deadline_exceeded` or `unavailable` within the
    /// gateway's request timeout (the RPC adapter: each call carries that deadline). Otherwise
    /// the gateway races each call against a timer of its own, which costs two child tasks and a
    /// timer per request.
    var enforcesDeadlines: Bool { get }
}

extension GatewayBackend {
    /// No hashing-pool figures (a backend without an identity service to ask).
    public func hashPoolStats() async -> HashPoolStats? { nil }
    /// By default the gateway enforces its request timeout itself.
    public var enforcesDeadlines: Bool { false }
}

/// The identity service's password-hashing pool, as `/metrics` shows it.
public struct HashPoolStats: Sendable, Hashable {
    public var workers: Int
    public var busyWorkers: Int
    public var queueDepth: Int
    public var queueLimit: Int
    public var completed: Int
    public var rejected: Int

    public init(workers: Int, busyWorkers: Int, queueDepth: Int, queueLimit: Int, completed: Int, rejected: Int) {
        self.workers = workers
        self.busyWorkers = busyWorkers
        self.queueDepth = queueDepth
        self.queueLimit = queueLimit
        self.completed = completed
        self.rejected = rejected
    }
}

/// A user as the HTTP API shows it.
///
/// JSON: `{id, email, emailVerified, displayName, photoURL, isAnonymous, createdAt, lastSignInAt, settings}`,
/// dates as ISO-8601 strings, `null` for an absent display name, photo URL or last sign-in.
public struct UserView: Sendable, Hashable {
    public var id: String
    public var email: String
    public var emailVerified: Bool
    public var displayName: String?
    public var photoURL: String?
    public var isAnonymous: Bool
    public var createdAt: Date
    public var lastSignInAt: Date?
    /// The user's settings as JSON object text, written to clients byte for byte. Empty means `{}`.
    public var settingsJSON: String

    public init(
        id: String, email: String, emailVerified: Bool = false, displayName: String? = nil, photoURL: String? = nil,
        isAnonymous: Bool = false, createdAt: Date, lastSignInAt: Date? = nil, settingsJSON: String = "{}"
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
    }
}

/// A password strength estimate: `score` 0 (very weak) to 4 (strong), and hints for the user.
public struct PasswordStrengthView: Sendable, Hashable, Codable {
    public var score: Int
    public var feedback: [String]

    public init(score: Int, feedback: [String] = []) {
        self.score = score
        self.feedback = feedback
    }
}
