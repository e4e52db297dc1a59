import Foundation

// Wire messages of the identity service's self-service account methods (proto/identity.proto).

/// The caller of a self-service method (`gatehouse.identity.v1.AuthenticatedCaller`), as the
/// gateway verified it from the access token. The identity service acts on this user only, and
/// compares `authTime` with its recent-login window (`requires_recent_login`).
public struct AuthenticatedCaller: Codable, Sendable, Hashable {
    /// The user (the token's `sub`).
    public var userID: String
    /// The session (the token's `sid`).
    public var sessionID: String
    /// When the user last authenticated for this session (the token's `auth_time`).
    public var authTime: Date

    /// The caller `userID`, on session `sessionID`, authenticated at `authTime`.
    public init(userID: String, sessionID: String, authTime: Date) {
        self.userID = userID
        self.sessionID = sessionID
        self.authTime = authTime
    }

    enum CodingKeys: Int, CodingKey { case userID = 1, sessionID = 2, authTime = 3 }
}

/// `identity.reauthenticate` request: the caller proves again that they know their password,
/// and gets a new session (fresh `auth_time`) that replaces the presented one.
public struct ReauthenticateRequest: Codable, Sendable, Hashable {
    /// The signed-in caller, whose session the new one replaces.
    public var caller: AuthenticatedCaller
    /// The email to check; nil: the caller's own. Another user's valid credentials answer
    /// `user_mismatch`.
    public var email: String?
    /// The caller's password.
    public var password: String
    /// The client re-authenticating, stored with the new session.
    public var client: ClientInfo

    /// A re-authentication of `caller` with `password` (and `email`, the caller's own unless given).
    public init(caller: AuthenticatedCaller, email: String? = nil, password: String, client: ClientInfo = ClientInfo()) {
        self.caller = caller
        self.email = email
        self.password = password
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case caller = 1, email = 2, password = 3, client = 4 }
}

/// `identity.changePassword` request: sets the caller's password (recent login required).
public struct ChangePasswordRequest: Codable, Sendable, Hashable {
    /// The signed-in caller; its session is the one that stays valid.
    public var caller: AuthenticatedCaller
    /// The new password; refused with `weak_password` when the policy does not accept it.
    public var password: String
    /// The client asking, for the audit log.
    public var client: ClientInfo

    /// A change of `caller`'s password to `password`.
    public init(caller: AuthenticatedCaller, password: String, client: ClientInfo = ClientInfo()) {
        self.caller = caller
        self.password = password
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case caller = 1, password = 2, client = 3 }
}

/// `identity.changeEmail` request: asks to change the caller's email address (recent login
/// required); the change waits for the code mailed to the new address.
public struct ChangeEmailRequest: Codable, Sendable, Hashable {
    /// The signed-in caller.
    public var caller: AuthenticatedCaller
    /// The new address; refused with `invalid_email` or `email_exists`.
    public var email: String
    /// The confirmation mail's language (`en`, `ja`, ...; see `PasswordResetRequest.locale`).
    public var locale: String
    /// The client asking, for the log.
    public var client: ClientInfo

    /// A change of `caller`'s email to `email` (confirmed from a mail to `email`, in `locale`).
    public init(caller: AuthenticatedCaller, email: String, locale: String = "en", client: ClientInfo = ClientInfo()) {
        self.caller = caller
        self.email = email
        self.locale = locale
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case caller = 1, email = 2, locale = 3, client = 4 }
}

/// `identity.changePassword` / `identity.changeEmail` reply.
public struct CredentialChangeResponse: Codable, Sendable, Hashable {
    /// The user after the change.
    public var user: User
    /// The sessions the change revoked (committed in the token service before this reply), so
    /// the gateway refuses their access tokens at once; empty for an email change.
    public var revokedSessionIDs: [String]

    /// For an email change: the address a confirmation mail went to (the user's email is
    /// unchanged until it is confirmed); nil otherwise.
    public var pendingEmail: String?
    /// For an email change: seconds the confirmation code works.
    public var pendingExpiresIn: Int64?

    /// A reply with the changed user and the sessions revoked (and, for an email change, the
    /// address waiting for confirmation).
    public init(user: User, revokedSessionIDs: [String] = [], pendingEmail: String? = nil, pendingExpiresIn: Int64? = nil) {
        self.user = user
        self.revokedSessionIDs = revokedSessionIDs
        self.pendingEmail = pendingEmail
        self.pendingExpiresIn = pendingExpiresIn
    }

    enum CodingKeys: Int, CodingKey { case user = 1, revokedSessionIDs = 2, pendingEmail = 3, pendingExpiresIn = 4 }
}

/// `identity.deleteAccount` request: the caller deletes their own account.
public struct DeleteAccountRequest: Codable, Sendable, Hashable {
    /// The signed-in caller, the user to delete.
    public var caller: AuthenticatedCaller
    /// Whether to create a fresh anonymous user and session in the same call.
    public var continueAnonymously: Bool
    /// The client, stored with the anonymous session when one is made.
    public var client: ClientInfo

    /// A deletion of `caller`'s account, continuing anonymously when asked.
    public init(caller: AuthenticatedCaller, continueAnonymously: Bool = false, client: ClientInfo = ClientInfo()) {
        self.caller = caller
        self.continueAnonymously = continueAnonymously
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case caller = 1, continueAnonymously = 2, client = 3 }
}

/// `identity.deleteAccount` reply.
public struct DeleteAccountResponse: Codable, Sendable, Hashable {
    /// The deleted user's sessions (committed as revoked in the token service before this
    /// reply), so the gateway refuses their access tokens at once.
    public var revokedSessionIDs: [String]
    /// The new anonymous user and its session, when `continueAnonymously` was asked.
    public var anonymous: AuthResponse?

    /// A reply naming the revoked sessions, with the anonymous continuation when one was made.
    public init(revokedSessionIDs: [String], anonymous: AuthResponse? = nil) {
        self.revokedSessionIDs = revokedSessionIDs
        self.anonymous = anonymous
    }

    enum CodingKeys: Int, CodingKey { case revokedSessionIDs = 1, anonymous = 2 }
}

extension IdentityAPI {
    /// Checks the caller's password again and replaces the caller's session with a new one
    /// (fresh `auth_time`). Errors: `invalid_credentials`, `user_mismatch`, `user_disabled`,
    /// `too_many_attempts`.
    public static let reauthenticate = RPCMethod<ReauthenticateRequest, AuthResponse>(
        name: "identity.reauthenticate", callers: [.gateway])
    /// Sets the caller's password (recent login required) and revokes the caller's other
    /// sessions. Errors: `requires_recent_login`, `weak_password`, `invalid_argument` (anonymous).
    public static let changePassword = RPCMethod<ChangePasswordRequest, CredentialChangeResponse>(
        name: "identity.changePassword", callers: [.gateway])
    /// Asks to change the caller's email (recent login required): a code is mailed to the new
    /// address and the user is unchanged until `confirmEmailChange` (the reply's `pendingEmail`);
    /// the same address in another case is set at once. Errors: `requires_recent_login`,
    /// `invalid_email`, `email_exists`, `rate_limited` (per-user mail limits), `invalid_argument` (anonymous).
    public static let changeEmail = RPCMethod<ChangeEmailRequest, CredentialChangeResponse>(
        name: "identity.changeEmail", callers: [.gateway])
    /// Deletes the caller's account (recent login required unless anonymous) after revoking
    /// every session of it. Errors: `requires_recent_login`.
    public static let deleteAccount = RPCMethod<DeleteAccountRequest, DeleteAccountResponse>(
        name: "identity.deleteAccount", callers: [.gateway])
}

extension IdentityAPI.Topic {
    /// Published after a user's email address changed (`UserEvent`; no `user.updated` is
    /// published for it): a confirmed change, a revert, or a change of case only.
    public static let userEmailChanged = "user.email_changed"
}
