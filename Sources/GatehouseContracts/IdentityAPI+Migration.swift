import Foundation

// Wire messages of upgrading an anonymous user in place and of migrating one to an existing
// account (proto/identity.proto).

/// `identity.upgradeAnonymous` request: the calling anonymous user gets an email and a password
/// and keeps its id.
public struct UpgradeAnonymousRequest: Codable, Sendable, Hashable {
    /// The anonymous caller, from its verified access token.
    public var caller: AuthenticatedCaller
    /// The email address to register; refused with `invalid_email` or `email_exists`.
    public var email: String
    /// The password to register; refused with `weak_password` when the policy does not accept it.
    public var password: String
    /// The display name to set (at most 256 characters, no control characters); nil or "": unchanged.
    public var displayName: String?
    /// The client upgrading, stored with the new session.
    public var client: ClientInfo
    /// The languages of the verification mail (the gateway's `Accept-Language` preference list),
    /// when the upgrade mails one (`GATEHOUSE_EMAIL_VERIFICATION` send or required).
    public var locale: String

    /// An upgrade of `caller` to `email` and `password`.
    public init(
        caller: AuthenticatedCaller, email: String, password: String, displayName: String? = nil, client: ClientInfo = ClientInfo(),
        locale: String = "en"
    ) {
        self.caller = caller
        self.email = email
        self.password = password
        self.displayName = displayName
        self.client = client
        self.locale = locale
    }

    enum CodingKeys: Int, CodingKey { case caller = 1, email = 2, password = 3, displayName = 4, client = 5, locale = 6 }
}

/// `identity.resumeSignIn` request: the decision on a `migration_required` answer, with its handle.
public struct ResumeSignInRequest: Codable, Sendable, Hashable {
    /// The anonymous caller; must be on the session that got the handle.
    public var caller: AuthenticatedCaller
    /// The `resumeHandle` of the `migration_required` answer (single use).
    public var resumeHandle: String
    /// Whether the app will copy the anonymous user's data (reported back as `performMigration`);
    /// the anonymous user is deleted either way.
    public var allowMigration: Bool
    /// The client resuming, stored with the new session.
    public var client: ClientInfo

    /// A resume of `caller`'s sign-in with `resumeHandle`.
    public init(caller: AuthenticatedCaller, resumeHandle: String, allowMigration: Bool, client: ClientInfo = ClientInfo()) {
        self.caller = caller
        self.resumeHandle = resumeHandle
        self.allowMigration = allowMigration
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case caller = 1, resumeHandle = 2, allowMigration = 3, client = 4 }
}

/// What a migrating sign-in did (`AuthResponse.migration`): the anonymous user was deleted and
/// the caller is now signed in to the existing one.
public struct MigrationOutcome: Codable, Sendable, Hashable {
    /// The anonymous user, now deleted.
    public var oldUserID: String
    /// The existing user now signed in.
    public var newUserID: String
    /// The caller's decision (`allowMigration`): whether the app copies the old user's data.
    public var performMigration: Bool
    /// The anonymous user's sessions revoked by the deletion (the gateway refuses their access
    /// tokens at once; not shown to clients).
    public var revokedSessionIDs: [String]

    /// The outcome of migrating `oldUserID` to `newUserID`.
    public init(oldUserID: String, newUserID: String, performMigration: Bool, revokedSessionIDs: [String] = []) {
        self.oldUserID = oldUserID
        self.newUserID = newUserID
        self.performMigration = performMigration
        self.revokedSessionIDs = revokedSessionIDs
    }

    enum CodingKeys: Int, CodingKey { case oldUserID = 1, newUserID = 2, performMigration = 3, revokedSessionIDs = 4 }
}
