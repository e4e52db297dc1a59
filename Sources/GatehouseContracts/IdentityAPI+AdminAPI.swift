import Foundation

// The identity service's side of the admin API (issue 22 §1; proto/identity.proto): admin API
// keys, and the administrative user operations the admin listener calls. Every method here is
// callable by the identity service's own key only (the admin listener runs in the identity
// process; `gatehouse admin keys` runs with its configuration). Each writing request names its
// `actor` for the audit log: `admin_key:<id>` from the admin API, "" (the operator) from the CLI.

/// An admin API key as stored and listed (never its secret).
public struct AdminKey: Codable, Sendable, Hashable {
    /// The key's id: 16 base64url characters, the part of the key before the dot.
    public var id: String
    /// What the operator called it.
    public var name: String
    /// What it may do, sorted (`AdminKey.Scope`).
    public var scopes: [String]
    /// When it was made.
    public var createdAt: Date
    /// When it was revoked; nil while it works.
    public var revokedAt: Date?
    /// When it last authenticated a request (to the minute); nil: never.
    public var lastUsedAt: Date?

    /// A key.
    public init(id: String, name: String, scopes: [String], createdAt: Date, revokedAt: Date? = nil, lastUsedAt: Date? = nil) {
        self.id = id
        self.name = name
        self.scopes = scopes
        self.createdAt = createdAt
        self.revokedAt = revokedAt
        self.lastUsedAt = lastUsedAt
    }

    enum CodingKeys: Int, CodingKey { case id = 1, name = 2, scopes = 3, createdAt = 4, revokedAt = 5, lastUsedAt = 6 }

    /// The scopes a key can hold.
    public enum Scope {
        /// List, search and read users.
        public static let usersRead = "users:read"
        /// Create, update, disable, enable and delete users; generate action links.
        public static let usersWrite = "users:write"
        /// Import users in bulk (`POST /admin/v1/users/import`).
        public static let usersImport = "users:import"
        /// Export every user, password hashes included when asked (`GET /admin/v1/users/export`).
        public static let usersExport = "users:export"
        /// List and revoke a user's sessions.
        public static let sessions = "sessions"
        /// Set custom claims.
        public static let claims = "claims"
        /// Read the audit log.
        public static let audit = "audit"
        /// Rotate the JWT signing keys.
        public static let signingKeys = "signing_keys"
        /// Every scope, sorted.
        public static let all = [audit, claims, sessions, signingKeys, usersExport, usersImport, usersRead, usersWrite]
    }
}

/// `identity.createAdminKey` request.
public struct CreateAdminKeyRequest: Codable, Sendable, Hashable {
    /// A name for the key (1 to 64 bytes, printable).
    public var name: String
    /// Its scopes (`AdminKey.Scope`; at least one, or `all`).
    public var scopes: [String]

    /// A new key `name` with `scopes`.
    public init(name: String, scopes: [String]) {
        self.name = name
        self.scopes = scopes
    }

    enum CodingKeys: Int, CodingKey { case name = 1, scopes = 2 }
}

/// `identity.createAdminKey` reply: the key, and the secret shown this once.
public struct CreateAdminKeyResponse: Codable, Sendable, Hashable {
    /// The stored key.
    public var key: AdminKey
    /// The whole key to present as `Authorization: Bearer …`: `gha_<id>.<secret>`. Only its hash is kept.
    public var token: String

    /// A created key and its token.
    public init(key: AdminKey, token: String) {
        self.key = key
        self.token = token
    }

    enum CodingKeys: Int, CodingKey { case key = 1, token = 2 }
}

/// `identity.listAdminKeys` reply.
public struct AdminKeyList: Codable, Sendable, Hashable {
    /// Every key, revoked ones included, oldest first.
    public var keys: [AdminKey]

    /// A list of `keys`.
    public init(keys: [AdminKey]) { self.keys = keys }

    enum CodingKeys: Int, CodingKey { case keys = 1 }
}

/// `identity.revokeAdminKey` request.
public struct AdminKeyIDRequest: Codable, Sendable, Hashable {
    /// The key's id.
    public var id: String

    /// The key `id`.
    public init(id: String) { self.id = id }

    enum CodingKeys: Int, CodingKey { case id = 1 }
}

/// `identity.authenticateAdminKey` request.
public struct AuthenticateAdminKeyRequest: Codable, Sendable, Hashable {
    /// The presented key (`gha_<id>.<secret>`).
    public var token: String

    /// A check of `token`.
    public init(token: String) { self.token = token }

    enum CodingKeys: Int, CodingKey { case token = 1 }
}

/// A user as the admin API shows it: the user, its custom claims and when it last changed.
public struct AdminUser: Codable, Sendable, Hashable {
    /// The user.
    public var user: User
    /// Its custom claims (a JSON object), "" for none.
    public var customClaimsJSON: String
    /// When the user last changed.
    public var updatedAt: Date

    /// The admin view of `user`.
    public init(user: User, customClaimsJSON: String, updatedAt: Date) {
        self.user = user
        self.customClaimsJSON = customClaimsJSON
        self.updatedAt = updatedAt
    }

    enum CodingKeys: Int, CodingKey { case user = 1, customClaimsJSON = 2, updatedAt = 3 }
}

/// `identity.listUsers` request: a page of users in id order, filtered.
public struct ListUsersRequest: Codable, Sendable, Hashable {
    /// Users whose normalized email starts with this (lower-cased); "" for any.
    public var emailPrefix: String
    /// Users linked to this provider (`password`, `google.com`, …); "" for any.
    public var provider: String
    /// Only disabled (true) or enabled (false) users; nil for both.
    public var disabled: Bool?
    /// Only anonymous (true) or regular (false) users; nil for both.
    public var anonymous: Bool?
    /// Only users created at or after this time.
    public var createdAfter: Date?
    /// Only users created before this time.
    public var createdBefore: Date?
    /// At most this many (1 … `maxUsersPage`; 0: 100).
    public var limit: Int32
    /// The `nextCursor` of the previous page; "" for the first.
    public var cursor: String

    /// A filtered page request.
    public init(
        emailPrefix: String = "", provider: String = "", disabled: Bool? = nil, anonymous: Bool? = nil, createdAfter: Date? = nil,
        createdBefore: Date? = nil, limit: Int32 = 0, cursor: String = ""
    ) {
        self.emailPrefix = emailPrefix
        self.provider = provider
        self.disabled = disabled
        self.anonymous = anonymous
        self.createdAfter = createdAfter
        self.createdBefore = createdBefore
        self.limit = limit
        self.cursor = cursor
    }

    enum CodingKeys: Int, CodingKey {
        case emailPrefix = 1, provider = 2, disabled = 3, anonymous = 4, createdAfter = 5, createdBefore = 6, limit = 7, cursor = 8
    }
}

/// `identity.listUsers` reply.
public struct ListUsersResponse: Codable, Sendable, Hashable {
    /// The page, in id order.
    public var users: [AdminUser]
    /// The cursor of the next page; "" after the last.
    public var nextCursor: String

    /// A page of `users`.
    public init(users: [AdminUser], nextCursor: String) {
        self.users = users
        self.nextCursor = nextCursor
    }

    enum CodingKeys: Int, CodingKey { case users = 1, nextCursor = 2 }
}

/// The largest page of `identity.listUsers`.
public let maxUsersPage: Int32 = 1_000

/// `identity.adminGetUser`, `adminDeleteUser` and `revokeUserSessions` request.
public struct AdminUserRequest: Codable, Sendable, Hashable {
    /// The user.
    public var userID: String
    /// Who asks, for the audit log (`admin_key:<id>`); "" for the operator's CLI.
    public var actor: String
    /// The admin client as the admin listener saw it, for the audit log.
    public var client: ClientInfo

    /// A request about `userID` by `actor`.
    public init(userID: String, actor: String = "", client: ClientInfo = ClientInfo()) {
        self.userID = userID
        self.actor = actor
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case userID = 1, actor = 2, client = 3 }
}

/// `identity.adminCreateUser` request: a user made by an operator (no session, no mail).
public struct AdminCreateUserRequest: Codable, Sendable, Hashable {
    /// The address (required).
    public var email: String
    /// A password under the policy; nil for a user without one (it signs in after a reset).
    public var password: String?
    /// Whether the address counts as verified.
    public var emailVerified: Bool
    /// A display name; nil for none.
    public var displayName: String?
    /// Whether the user starts disabled.
    public var disabled: Bool
    /// Who asks, for the audit log.
    public var actor: String
    /// The admin client as the admin listener saw it, for the audit log.
    public var client: ClientInfo

    /// A new user.
    public init(
        email: String, password: String? = nil, emailVerified: Bool = false, displayName: String? = nil, disabled: Bool = false,
        actor: String = "", client: ClientInfo = ClientInfo()
    ) {
        self.email = email
        self.password = password
        self.emailVerified = emailVerified
        self.displayName = displayName
        self.disabled = disabled
        self.actor = actor
        self.client = client
    }

    enum CodingKeys: Int, CodingKey {
        case email = 1, password = 2, emailVerified = 3, displayName = 4, disabled = 5, actor = 6, client = 7
    }
}

/// `identity.adminUpdateUser` request: each field given is set, an absent one kept.
public struct AdminUpdateUserRequest: Codable, Sendable, Hashable {
    /// The user.
    public var userID: String
    /// A new address (applied at once, no mail; unverified unless `emailVerified` says so).
    public var email: String?
    /// A new display name ("" clears it).
    public var displayName: String?
    /// Disable (true; every session revoked) or enable (false).
    public var disabled: Bool?
    /// Whether the address counts as verified.
    public var emailVerified: Bool?
    /// A new password under the policy (every session revoked).
    public var password: String?
    /// Who asks, for the audit log.
    public var actor: String
    /// The admin client as the admin listener saw it, for the audit log.
    public var client: ClientInfo

    /// A change of `userID`.
    public init(
        userID: String, email: String? = nil, displayName: String? = nil, disabled: Bool? = nil, emailVerified: Bool? = nil,
        password: String? = nil, actor: String = "", client: ClientInfo = ClientInfo()
    ) {
        self.userID = userID
        self.email = email
        self.displayName = displayName
        self.disabled = disabled
        self.emailVerified = emailVerified
        self.password = password
        self.actor = actor
        self.client = client
    }

    enum CodingKeys: Int, CodingKey {
        case userID = 1, email = 2, displayName = 3, disabled = 4, emailVerified = 5, password = 6, actor = 7, client = 8
    }
}

/// `identity.adminSetClaims` request.
public struct AdminSetClaimsRequest: Codable, Sendable, Hashable {
    /// The user.
    public var userID: String
    /// A JSON object of at most 1,000 bytes without reserved names; "" or `{}` clears them.
    public var claimsJSON: String
    /// Who asks, for the audit log.
    public var actor: String
    /// The admin client as the admin listener saw it, for the audit log.
    public var client: ClientInfo

    /// A request to set `userID`'s custom claims.
    public init(userID: String, claimsJSON: String, actor: String = "", client: ClientInfo = ClientInfo()) {
        self.userID = userID
        self.claimsJSON = claimsJSON
        self.actor = actor
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case userID = 1, claimsJSON = 2, actor = 3, client = 4 }
}

/// `identity.generateActionLink` request: a password-reset or verification link, not sent.
public struct GenerateActionLinkRequest: Codable, Sendable, Hashable {
    /// The user.
    public var userID: String
    /// `password_reset` or `verify_email`.
    public var kind: String
    /// Who asks, for the audit log.
    public var actor: String
    /// The admin client as the admin listener saw it, for the audit log.
    public var client: ClientInfo

    /// A link of `kind` for `userID`.
    public init(userID: String, kind: String, actor: String = "", client: ClientInfo = ClientInfo()) {
        self.userID = userID
        self.kind = kind
        self.actor = actor
        self.client = client
    }

    enum CodingKeys: Int, CodingKey { case userID = 1, kind = 2, actor = 3, client = 4 }
}

/// `identity.generateActionLink` reply.
public struct ActionLink: Codable, Sendable, Hashable {
    /// The link, as a mail would carry it (`GATEHOUSE_MAIL_LINK_BASE`); "" when links are off.
    public var link: String
    /// The one-time code the link carries.
    public var code: String
    /// Seconds the code stays valid.
    public var expiresIn: Int64

    /// A link with `code`.
    public init(link: String, code: String, expiresIn: Int64) {
        self.link = link
        self.code = code
        self.expiresIn = expiresIn
    }

    enum CodingKeys: Int, CodingKey { case link = 1, code = 2, expiresIn = 3 }
}

extension IdentityAPI {
    /// Makes an admin API key; the reply's token is shown once. Errors: `invalid_argument`
    /// (name, scopes). Own key only.
    public static let createAdminKey = RPCMethod<CreateAdminKeyRequest, CreateAdminKeyResponse>(name: "identity.createAdminKey")
    /// Every admin API key. Own key only. Idempotent.
    public static let listAdminKeys = RPCMethod<Empty, AdminKeyList>(name: "identity.listAdminKeys", idempotent: true)
    /// Revokes a key at once (its next request is refused). Errors: `admin_key_not_found`. Own key only. Idempotent.
    public static let revokeAdminKey = RPCMethod<AdminKeyIDRequest, AdminKey>(name: "identity.revokeAdminKey", idempotent: true)
    /// The key a presented token belongs to, if it is valid and not revoked. Errors:
    /// `invalid_admin_key`. Own key only (the admin listener). Idempotent.
    public static let authenticateAdminKey = RPCMethod<AuthenticateAdminKeyRequest, AdminKey>(
        name: "identity.authenticateAdminKey", idempotent: true)
    /// A filtered page of users. Errors: `invalid_argument`. Own key only. Idempotent.
    public static let listUsers = RPCMethod<ListUsersRequest, ListUsersResponse>(name: "identity.listUsers", idempotent: true)
    /// One user, with its custom claims. Errors: `user_not_found`. Own key only. Idempotent.
    public static let adminGetUser = RPCMethod<AdminUserRequest, AdminUser>(name: "identity.adminGetUser", idempotent: true)
    /// Creates a user without a session or mail. Errors: `invalid_email`, `email_exists`,
    /// `weak_password`, `invalid_argument`. Own key only.
    public static let adminCreateUser = RPCMethod<AdminCreateUserRequest, AdminUser>(name: "identity.adminCreateUser")
    /// Changes a user. Errors: `user_not_found`, `invalid_email`, `email_exists`,
    /// `weak_password`, `invalid_argument`. Own key only.
    public static let adminUpdateUser = RPCMethod<AdminUpdateUserRequest, AdminUser>(name: "identity.adminUpdateUser")
    /// Deletes a user, revoking every session first and after. Errors: `user_not_found`. Own key only.
    public static let adminDeleteUser = RPCMethod<AdminUserRequest, Empty>(name: "identity.adminDeleteUser")
    /// Sets a user's custom claims. Errors: `user_not_found`, `invalid_argument`. Own key only. Idempotent.
    public static let adminSetClaims = RPCMethod<AdminSetClaimsRequest, AdminUser>(name: "identity.adminSetClaims", idempotent: true)
    /// Revokes every session of a user (committed before the reply). Errors: `user_not_found`. Own key only. Idempotent.
    public static let revokeUserSessions = RPCMethod<AdminUserRequest, RevokedCount>(name: "identity.revokeUserSessions", idempotent: true)
    /// A password-reset or verification link for a user, stored but not mailed. Errors:
    /// `user_not_found`, `invalid_argument` (kind; a verify link for an anonymous user),
    /// `email_already_verified`. Own key only.
    public static let generateActionLink = RPCMethod<GenerateActionLinkRequest, ActionLink>(name: "identity.generateActionLink")
}
