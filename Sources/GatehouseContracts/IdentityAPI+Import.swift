import Foundation

// Wire messages of bulk import and export (issue 22 §5; proto/identity.proto), used by
// `gatehouse users import` and `gatehouse users export`.

/// A user as imported (`identity.importUsers`) or exported (`identity.exportUsers`).
public struct ImportedUser: Codable, Sendable, Hashable {
    /// The user's id (22–64 URL-safe characters); nil: a new id at import.
    public var id: String?
    /// The email address; nil: an anonymous user (without a password).
    public var email: String?
    /// Whether the address is verified.
    public var emailVerified: Bool
    /// The display name; "" clears it on update.
    public var displayName: String?
    /// The photo URL (http or https); "" clears it on update.
    public var photoURL: String?
    /// The password hash in a format sign-in verifies; nil: none (export: left out unless asked).
    public var passwordHash: String?
    /// The linked providers (`google.com`, ...), without `password`.
    public var providers: [String]
    /// The custom claims, a JSON object of at most 1,000 bytes.
    public var customClaimsJSON: String?
    /// Whether the user is disabled.
    public var disabled: Bool
    /// When the user was created; nil: the time of the import.
    public var createdAt: Date?
    /// The provider identities to link (a provider's own id of the person: Firebase's
    /// `providerUserInfo[].rawId`), so the user's next sign-in with that provider finds it.
    public var identities: [ImportedIdentity]

    /// A user to import or an exported one.
    public init(
        id: String? = nil, email: String? = nil, emailVerified: Bool = false, displayName: String? = nil, photoURL: String? = nil,
        passwordHash: String? = nil, providers: [String] = [], customClaimsJSON: String? = nil, disabled: Bool = false,
        createdAt: Date? = nil, identities: [ImportedIdentity] = []
    ) {
        self.id = id
        self.email = email
        self.emailVerified = emailVerified
        self.displayName = displayName
        self.photoURL = photoURL
        self.passwordHash = passwordHash
        self.providers = providers
        self.customClaimsJSON = customClaimsJSON
        self.disabled = disabled
        self.createdAt = createdAt
        self.identities = identities
    }

    enum CodingKeys: Int, CodingKey {
        case id = 1, email = 2, emailVerified = 3, displayName = 4, photoURL = 5, passwordHash = 6, providers = 7
        case customClaimsJSON = 8, disabled = 9, createdAt = 10, identities = 11
    }
}

/// A provider identity of an imported or exported user: the provider and its id of the person.
public struct ImportedIdentity: Codable, Sendable, Hashable {
    /// `google.com`, `apple.com` or `oidc.<name>`.
    public var provider: String
    /// The provider's id of the person (the `sub` of its ID tokens).
    public var subject: String

    /// The identity `subject` of `provider`.
    public init(provider: String, subject: String) {
        self.provider = provider
        self.subject = subject
    }

    enum CodingKeys: Int, CodingKey { case provider = 1, subject = 2 }
}

/// `identity.importUsers` request: a batch of users and what to do with existing ones.
public struct ImportUsersRequest: Codable, Sendable, Hashable {
    /// The users, at most `IdentityAPI.maxImportBatch`.
    public var users: [ImportedUser]
    /// `skip` ("" too): an existing user is left as it is; `update`: it is overwritten.
    public var mode: String
    /// Who imports, for the audit log: `admin_key:<id>` from the admin API, "" (the operator)
    /// from `gatehouse users import`.
    public var actor: String

    /// A batch of `users` imported in `mode` by `actor`.
    public init(users: [ImportedUser], mode: String = "skip", actor: String = "") {
        self.users = users
        self.mode = mode
        self.actor = actor
    }

    enum CodingKeys: Int, CodingKey { case users = 1, mode = 2, actor = 3 }
}

/// What became of one imported item.
public struct ImportResult: Codable, Sendable, Hashable {
    /// The item's index in the request.
    public var index: Int32
    /// `created`, `updated`, `skipped` or `failed`.
    public var outcome: String
    /// The user's id (new or matched); "" when failed.
    public var userID: String
    /// When failed: a code of the error table.
    public var errorCode: String
    /// When failed: why, in words an operator can act on (never the hash).
    public var errorMessage: String

    /// The result of item `index`.
    public init(index: Int32, outcome: String, userID: String = "", errorCode: String = "", errorMessage: String = "") {
        self.index = index
        self.outcome = outcome
        self.userID = userID
        self.errorCode = errorCode
        self.errorMessage = errorMessage
    }

    enum CodingKeys: Int, CodingKey { case index = 1, outcome = 2, userID = 3, errorCode = 4, errorMessage = 5 }
}

/// `identity.importUsers` reply: one result per item, in order.
public struct ImportUsersResponse: Codable, Sendable, Hashable {
    /// One result per item.
    public var results: [ImportResult]

    /// A reply with `results`.
    public init(results: [ImportResult]) { self.results = results }

    enum CodingKeys: Int, CodingKey { case results = 1 }
}

/// `identity.exportUsers` request: one page of users in id order.
public struct ExportUsersRequest: Codable, Sendable, Hashable {
    /// The cursor: users with an id after this one; "" from the first.
    public var afterID: String
    /// At most this many users (1 … 1,000; 0: 1,000).
    public var pageSize: Int32
    /// Whether the users' password hashes are included.
    public var includeHashes: Bool

    /// The page after `afterID`.
    public init(afterID: String = "", pageSize: Int32 = 0, includeHashes: Bool = false) {
        self.afterID = afterID
        self.pageSize = pageSize
        self.includeHashes = includeHashes
    }

    enum CodingKeys: Int, CodingKey { case afterID = 1, pageSize = 2, includeHashes = 3 }
}

/// `identity.exportUsers` reply: a page and the next cursor.
public struct ExportUsersResponse: Codable, Sendable, Hashable {
    /// The users, in id order.
    public var users: [ImportedUser]
    /// The cursor of the next page; "" after the last.
    public var nextAfterID: String

    /// A page of `users`.
    public init(users: [ImportedUser], nextAfterID: String) {
        self.users = users
        self.nextAfterID = nextAfterID
    }

    enum CodingKeys: Int, CodingKey { case users = 1, nextAfterID = 2 }
}

extension IdentityAPI {
    /// The most users one `importUsers` call or `exportUsers` page carries.
    public static let maxImportBatch = 1_000

    /// Imports a batch of users in one transaction, each item on its own (administrative: only
    /// the identity service's own key: the CLI's direct path, or the admin API's
    /// `POST /admin/v1/users/import` in the identity role). Errors: `invalid_argument` (too many
    /// users, an unknown mode, an actor over 128 bytes); per item in the results. Idempotent.
    public static let importUsers = RPCMethod<ImportUsersRequest, ImportUsersResponse>(name: "identity.importUsers", idempotent: true)

    /// One page of users in id order, hashes only when asked (administrative: only the identity
    /// service's own key). Errors: `invalid_argument` (page size). Idempotent.
    public static let exportUsers = RPCMethod<ExportUsersRequest, ExportUsersResponse>(name: "identity.exportUsers", idempotent: true)
}
