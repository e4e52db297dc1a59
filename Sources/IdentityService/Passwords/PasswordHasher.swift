import Foundation
import IdentityPorts
import IdentityCore

/// Hashes and verifies passwords on a `HashPool`, with Argon2id at the configured parameters.
/// Passwords are given already NFKC-normalized (see `PasswordPolicy.normalize`).
public struct PasswordHasher: Sendable {
    /// The Argon2id costs of new hashes (older ones are upgraded at sign-in).
    public let parameters: Argon2Parameters
    /// Bounds on the cost of verifying an imported hash.
    public let limits: HashVerifyLimits
    /// The threads hashing runs on, off the cooperative pool.
    public let pool: HashPool
    /// Verified against for unknown emails, so they cost one real hash.
    private let dummyHash: String

    /// A hasher with these costs and bounds, hashing on `pool`.
    public init(parameters: Argon2Parameters = .owasp, limits: HashVerifyLimits = HashVerifyLimits(), pool: HashPool) {
        self.parameters = parameters
        self.limits = limits
        self.pool = pool
        self.dummyHash = PasswordHashing.dummyHash(parameters: parameters)
    }

    /// A new Argon2id PHC string for `password`. Throws `overloaded` when the queue is full or
    /// the hash could not be done by `deadline` (see `HashPool`).
    public func hash(_ password: String, deadline: ContinuousClock.Instant? = nil) async throws -> String {
        let bytes = Array(password.utf8), parameters = parameters
        return try await pool.run(deadline: deadline) { try PasswordHashing.argon2idHash(bytes, parameters: parameters) }
    }

    /// Whether `password` matches `encoded`. Throws `overloaded` when the queue is full or the
    /// check could not be done by `deadline`.
    public func verify(_ password: String, against encoded: String, deadline: ContinuousClock.Instant? = nil) async throws -> Bool {
        let bytes = Array(password.utf8), limits = limits
        return try await pool.run(deadline: deadline) { PasswordHashing.verify(bytes, against: encoded, limits: limits) }
    }

    /// Spends one verification's worth of work and returns false: for unknown emails.
    public func verifyDummy(_ password: String, deadline: ContinuousClock.Instant? = nil) async throws -> Bool {
        _ = try await verify(password, against: dummyHash, deadline: deadline)
        return false
    }

    /// Whether `encoded` should be replaced at the next successful sign-in.
    public func needsRehash(_ encoded: String) -> Bool {
        PasswordHashing.needsRehash(encoded, parameters: parameters)
    }
}
