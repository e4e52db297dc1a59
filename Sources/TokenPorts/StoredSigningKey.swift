import Foundation

/// A signing key as stored: its private half (sealed when a key-encryption key is set) and its lifetime.
public struct StoredSigningKey: Sendable {
    /// The key id (`kid`), the RFC 7638 thumbprint of its public key.
    public var kid: String
    /// `ES256`, `EdDSA` or `RS256`.
    public var algorithm: String
    /// The private key material, AES-GCM sealed when `encrypted`.
    public var privateKey: Data
    /// Whether `privateKey` is sealed with the key-encryption key.
    public var encrypted: Bool
    /// When the key was made.
    public var createdAt: Date
    /// When it starts signing: published from `createdAt`, it signs from here (a rotation
    /// across several instances publishes the key everywhere before any instance signs with it).
    public var activatesAt: Date
    /// When it stopped signing (nil: it is the active key, or the next one).
    public var signingUntil: Date?
    /// After this it leaves the JWKS (every token it signed has expired).
    public var retireAfter: Date?

    /// A stored key; it signs from `activatesAt` (default: from `createdAt`).
    public init(
        kid: String, algorithm: String, privateKey: Data, encrypted: Bool, createdAt: Date, activatesAt: Date? = nil,
        signingUntil: Date? = nil, retireAfter: Date? = nil
    ) {
        self.kid = kid
        self.algorithm = algorithm
        self.privateKey = privateKey
        self.encrypted = encrypted
        self.createdAt = createdAt
        self.activatesAt = activatesAt ?? createdAt
        self.signingUntil = signingUntil
        self.retireAfter = retireAfter
    }
}
