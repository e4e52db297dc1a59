import Foundation

/// A Gatehouse user, as `GET /v1/me` and every sign-in return it.
public struct User: Codable, Sendable, Equatable, Identifiable {
    /// The user's stable id.
    public var id: String
    /// The email address; nil for an anonymous user.
    public var email: String?
    /// Whether the address was verified (by a mailed code, or by a provider that vouches for it).
    public var emailVerified: Bool
    /// The name to show, if any.
    public var displayName: String?
    /// A URL of the user's picture, if any.
    public var photoURL: String?
    /// Whether the user has no way to sign in yet (created by `signInAnonymously()`).
    public var isAnonymous: Bool
    /// How the user can sign in, sorted: `password`, `apple.com`, `google.com`, …; empty when anonymous.
    public var providers: [String]
    /// When the user was created.
    public var createdAt: Date
    /// When the user last signed in, if ever.
    public var lastSignInAt: Date?
    /// The user's settings document (at most 16 KiB; see `ProfileUpdate.settings`).
    public var settings: [String: JSONValue]

    /// A user with these fields (for tests and previews; the server makes the real ones).
    public init(
        id: String, email: String?, emailVerified: Bool = false, displayName: String? = nil, photoURL: String? = nil,
        isAnonymous: Bool = false, providers: [String] = [], createdAt: Date = Date(), lastSignInAt: Date? = nil,
        settings: [String: JSONValue] = [:]
    ) {
        self.id = id
        self.email = email
        self.emailVerified = emailVerified
        self.displayName = displayName
        self.photoURL = photoURL
        self.isAnonymous = isAnonymous
        self.providers = providers
        self.createdAt = createdAt
        self.lastSignInAt = lastSignInAt
        self.settings = settings
    }
}

/// A JSON value: what a user's settings hold.
public enum JSONValue: Codable, Sendable, Equatable, Hashable {
    /// `null` (in a `ProfileUpdate`, removes the member).
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([String: JSONValue])

    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Encodes the value as JSON.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

/// Where the app stands: what `GatehouseClient.authState` reports.
public enum AuthState: Sendable, Equatable {
    /// No session on this device.
    case signedOut
    /// A session of an anonymous user.
    case anonymous(User)
    /// A session of a user who can sign in again (a password or a provider).
    case signedIn(User)

    /// The user of the session, if any.
    public var user: User? {
        switch self {
        case .signedOut: return nil
        case .anonymous(let user), .signedIn(let user): return user
        }
    }

    /// The state a session of `user` is in.
    public init(_ user: User?) {
        guard let user else {
            self = .signedOut
            return
        }
        self = user.isAnonymous ? .anonymous(user) : .signedIn(user)
    }
}

/// What the device keeps of a session (`TokenStore`): both tokens, when the access token
/// expires, and the user as last seen.
public struct StoredSession: Codable, Sendable, Equatable {
    /// The access token (a JWT) sent as `Authorization: Bearer`.
    public var accessToken: String
    /// The refresh token; each use returns a new one and retires this one.
    public var refreshToken: String
    /// When the access token expires (by the device's clock when it was received).
    public var expiresAt: Date
    /// The user the session belongs to, as last seen.
    public var user: User?

    /// A session with these tokens.
    public init(accessToken: String, refreshToken: String, expiresAt: Date, user: User?) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.user = user
    }
}

/// A sign-in credential from Apple or Google (or an OpenID Connect provider the server knows).
public struct ProviderCredential: Sendable, Equatable {
    /// The provider id: `apple.com`, `google.com` or `oidc.<name>`.
    public var provider: String
    /// The ID token the provider's SDK returned.
    public var idToken: String
    /// The raw nonce the app generated for this sign-in (Apple's token carries its SHA-256).
    public var rawNonce: String?
    /// The user's name as the provider gave it to the app (Apple sends it on the first
    /// authorisation only); set on the user when it has none.
    public var fullName: PersonNameParts?
    /// Sign in with Apple: the credential's `authorizationCode`, so the server can revoke the
    /// user's Apple tokens when the account is deleted.
    public var authorizationCode: String?
    /// The user's name as the provider's SDK gave it (Google, OpenID Connect); set on the user
    /// when it has none.
    public var displayName: String?

    /// A credential of `provider`.
    public init(
        provider: String, idToken: String, rawNonce: String? = nil, fullName: PersonNameParts? = nil, authorizationCode: String? = nil,
        displayName: String? = nil
    ) {
        self.provider = provider
        self.idToken = idToken
        self.rawNonce = rawNonce
        self.fullName = fullName
        self.authorizationCode = authorizationCode
        self.displayName = displayName
    }

    /// Sign in with Apple: the identity token, the raw nonce whose SHA-256 the request carried,
    /// and the name Apple returned (first authorisation only).
    public static func apple(idToken: String, rawNonce: String, fullName: PersonNameParts? = nil, authorizationCode: String? = nil) -> ProviderCredential {
        ProviderCredential(provider: "apple.com", idToken: idToken, rawNonce: rawNonce, fullName: fullName, authorizationCode: authorizationCode)
    }

    /// Google Sign-In: the ID token (and the nonce, if the request had one, and the name the SDK gave).
    public static func google(idToken: String, rawNonce: String? = nil, displayName: String? = nil) -> ProviderCredential {
        ProviderCredential(provider: "google.com", idToken: idToken, rawNonce: rawNonce, displayName: displayName)
    }
}

/// A person's name as Apple returns it (`PersonNameComponents` reduced to what is sent).
public struct PersonNameParts: Sendable, Equatable, Codable {
    /// The given name.
    public var givenName: String?
    /// The family name.
    public var familyName: String?

    /// A name of these parts.
    public init(givenName: String?, familyName: String?) {
        self.givenName = givenName
        self.familyName = familyName
    }
}

/// What `migrationRequired` carries: an anonymous user signed in to an account that exists.
/// Ask the user whether to bring the anonymous data along, then call
/// `GatehouseClient.resume(_:allowMigration:)`.
public struct MigrationContext: Sendable, Equatable {
    /// The anonymous user now signed in on this device (deleted when the sign-in resumes).
    public var anonymousUserID: String
    /// The existing account the credentials belong to.
    public var existingUserID: String
    /// The handle that resumes the sign-in once, from this session.
    public var resumeHandle: String
    /// How long the handle works, in seconds from when the error arrived.
    public var expiresIn: Int

    /// A context with these fields.
    public init(anonymousUserID: String, existingUserID: String, resumeHandle: String, expiresIn: Int) {
        self.anonymousUserID = anonymousUserID
        self.existingUserID = existingUserID
        self.resumeHandle = resumeHandle
        self.expiresIn = expiresIn
    }
}

/// What happened to the anonymous user when a sign-in migrated it.
public struct Migration: Sendable, Equatable, Codable {
    /// The anonymous user, now deleted.
    public var oldUserId: String
    /// The user now signed in.
    public var newUserId: String
    /// The `allowMigration` the app sent: whether to copy the anonymous user's data.
    public var performMigration: Bool
}

/// The outcome of a sign-in: the user, and the migration when an anonymous user was replaced.
public struct SignInResult: Sendable, Equatable {
    /// The signed-in user.
    public var user: User
    /// Present when the anonymous user of this device was migrated to `user`.
    public var migration: Migration?
}

/// The outcome of a sign-up.
public enum SignUpResult: Sendable, Equatable {
    /// Signed in as the new user.
    case signedIn(User)
    /// The account exists but the server requires a verified address first: no session yet
    /// (confirm the mailed code, then sign in).
    case verificationRequired(User)

    /// The new user.
    public var user: User {
        switch self {
        case .signedIn(let user), .verificationRequired(let user): return user
        }
    }
}

/// The outcome of an email change.
public enum EmailChangeResult: Sendable, Equatable {
    /// Nothing needed confirming (the same address, or only its letter case): the user as it is now.
    case changed(User)
    /// A code was mailed to the new address; the change happens when it is confirmed
    /// (`confirmEmailChange(code:)`).
    case pending(PendingEmailChange)
}

/// An email change waiting for its code.
public struct PendingEmailChange: Sendable, Equatable, Codable {
    /// The user, unchanged (still the old address).
    public var user: User
    /// The address the code was mailed to.
    public var pendingEmail: String
    /// Seconds the code works.
    public var expiresIn: Int
}

/// Where a verification mail went (`sendEmailVerification()`).
public struct EmailVerificationSent: Sendable, Equatable, Codable {
    /// The address the mail went to.
    public var email: String
    /// Seconds the code works.
    public var expiresIn: Int
}

/// A password's strength, for a meter (`passwordStrength(_:)`).
public struct PasswordStrength: Sendable, Equatable, Codable {
    /// 0 (guessable) to 4 (very strong); at most 1 when the policy would refuse the password.
    public var score: Int
    /// `weak`, `medium` or `strong`.
    public var level: String
    /// Hints to show.
    public var feedback: [String]
}

/// A change of the profile (`updateProfile(_:)`): nil fields are left as they are.
public struct ProfileUpdate: Sendable, Equatable {
    /// The new display name.
    public var displayName: String?
    /// The new photo URL.
    public var photoURL: String?
    /// A JSON merge patch of the settings (RFC 7396): `.null` removes a member, an object
    /// merges into the stored one, anything else replaces it.
    public var settings: [String: JSONValue]?

    /// An update of these fields.
    public init(displayName: String? = nil, photoURL: String? = nil, settings: [String: JSONValue]? = nil) {
        self.displayName = displayName
        self.photoURL = photoURL
        self.settings = settings
    }
}
