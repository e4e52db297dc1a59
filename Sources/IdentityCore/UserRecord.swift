import Foundation
import GatehouseSupport

/// A user id: 128 random bits, Base64url without padding (22 characters).
public struct UserID: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The id's text.
    public var rawValue: String
    /// `RawRepresentable`'s initializer: the id with this text (not checked: see `isWellFormed`).
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The id with this text (not checked: see `isWellFormed`).
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// The id's text.
    public var description: String { rawValue }

    /// A new random id from `generator`.
    /// Two 64-bit draws (the system generator makes a `getrandom` call per draw; a draw per
    /// byte made 16), written as base64url directly.
    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> UserID {
        let high = generator.next() as UInt64, low = generator.next() as UInt64
        let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        let text = String(unsafeUninitializedCapacity: 22) { out in
            let digits = alphabet.utf8Start
            var written = 0
            // 128 bits as 21 six-bit groups and a last group of two bits, most significant first.
            for group in 0..<22 {
                let bit = group * 6  // from the top of the 128-bit value
                var value: UInt64
                if bit + 6 <= 64 {
                    value = high >> UInt64(58 - bit)
                } else if bit < 64 {
                    value = (high << UInt64(bit - 58)) | (low >> UInt64(122 - bit))
                } else if bit + 6 <= 128 {
                    value = low >> UInt64(122 - bit)
                } else {
                    value = low << 4  // the last 2 bits, padded with zeros
                }
                out[written] = digits[Int(value & 0x3F)]
                written += 1
            }
            return written
        }
        return UserID(text)
    }

    /// A new random id from the system's generator.
    public static func random() -> UserID {
        var g = SystemRandomNumberGenerator()
        return random(using: &g)
    }

    /// Whether `text` looks like an id (1–64 URL-safe characters): a cheap check before a look-up.
    public static func isWellFormed(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64
            && text.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F
            }
    }
}

/// A user as stored, credentials included. Never sent over the wire as is (see `User`).
public struct UserRecord: Sendable, Hashable {
    /// The user's id, unique among users.
    public var id: UserID
    /// The email as typed (trimmed); nil for an anonymous user.
    public var email: String?
    /// The normalized email (unique); nil exactly when `email` is nil.
    public var emailNormalized: String?
    /// Whether the user proved they own `email`.
    public var emailVerified: Bool
    /// The name shown for the user (trimmed, at most 256 characters); nil when unset.
    public var displayName: String?
    /// The URL of the user's photo (http or https); nil when unset.
    public var photoURL: String?
    /// A PHC string (or a legacy crypt string for imported users); nil without a password.
    public var passwordHash: String?
    /// Whether the user is anonymous: no email address.
    public var isAnonymous: Bool
    /// Whether the user is disabled: sign-in refuses
    /// them, and disabling revoked their sessions.
    public var disabled: Bool
    /// A JSON object of at most 1,000 bytes, or "" for none.
    public var customClaimsJSON: String
    /// A JSON object of at most 16 KiB.
    public var settingsJSON: String
    /// When the user was created (milliseconds, as stored).
    public var createdAt: Date
    /// When the record last changed (milliseconds, as stored).
    public var updatedAt: Date
    /// The last successful sign-in (sign-up counts as one); nil: never.
    public var lastSignInAt: Date?
    /// Sessions authenticated before this instant are invalid.
    public var tokensValidAfter: Date?
    /// Starts at 1; each profile change adds 1.
    public var version: Int64
    /// The providers of the identities linked to the user (`google.com`, `apple.com`, ...),
    /// sorted, each once; `password` is not among them (see `providers`).
    public var linkedProviders: [String] = []

    /// How the user can sign in: `password` when it has a password hash, and every linked
    /// provider, sorted.
    public var providers: [String] {
        // `GET /v1/me` builds this for every request: the common cases allocate nothing.
        if linkedProviders.isEmpty { return passwordHash == nil ? [] : Self.passwordOnly }
        return passwordHash == nil ? linkedProviders : (linkedProviders + Self.passwordOnly).sorted()
    }

    private static let passwordOnly = ["password"]

    /// The largest `customClaimsJSON` a store accepts, in bytes.
    public static let maxCustomClaimsBytes = 1_000
    /// The largest `settingsJSON` a store (and `identity.updateProfile`) accepts, in bytes.
    public static let maxSettingsBytes = 16 * 1024

    /// A record; times are rounded to milliseconds (what the
    /// store keeps), and `updatedAt` defaults to `createdAt`.
    public init(
        id: UserID, email: EmailAddress?, emailVerified: Bool = false, displayName: String? = nil,
        photoURL: String? = nil, passwordHash: String? = nil, isAnonymous: Bool = false, disabled: Bool = false,
        customClaimsJSON: String = "", settingsJSON: String = "{}", createdAt: Date, updatedAt: Date? = nil,
        lastSignInAt: Date? = nil, tokensValidAfter: Date? = nil, version: Int64 = 1
    ) {
        self.id = id
        self.email = email?.typed
        self.emailNormalized = email?.normalized
        self.emailVerified = emailVerified
        self.displayName = displayName
        self.photoURL = photoURL
        self.passwordHash = passwordHash
        self.isAnonymous = isAnonymous
        self.disabled = disabled
        self.customClaimsJSON = customClaimsJSON
        self.settingsJSON = settingsJSON
        self.createdAt = createdAt.roundedToMilliseconds
        self.updatedAt = (updatedAt ?? createdAt).roundedToMilliseconds
        self.lastSignInAt = lastSignInAt?.roundedToMilliseconds
        self.tokensValidAfter = tokensValidAfter?.roundedToMilliseconds
        self.version = version
    }
}
