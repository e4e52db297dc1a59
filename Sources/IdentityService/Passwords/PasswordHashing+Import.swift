import Foundation
import IdentityPorts
import IdentityCore

/// Checking imported hashes (issue 22 §4): a hash whose format is unknown, malformed, or whose
/// cost is over the verification limits is refused when it is imported, not at the user's first
/// sign-in.
extension PasswordHashing {
    /// nil when `encoded` is a hash `verify` can check within `limits`; else why not, in words
    /// an operator can act on (never the hash itself).
    public static func importProblem(_ encoded: String, limits: HashVerifyLimits = HashVerifyLimits()) -> String? {
        guard !encoded.isEmpty, encoded.utf8.count <= 1024 else { return "the hash must be 1 to 1024 bytes" }
        if encoded.hasPrefix("$argon2") {
            guard let phc = PHCString(encoded), ["argon2id", "argon2i", "argon2d"].contains(phc.id), let m = phc.integer("m"),
                let t = phc.integer("t"), let p = phc.integer("p"), !phc.salt.isEmpty, !phc.hash.isEmpty
            else { return "a malformed Argon2 PHC string" }
            guard m <= limits.maxArgon2MemoryKiB, t <= limits.maxArgon2Iterations, p <= limits.maxParallelism else {
                return "Argon2 costs m=\(m) t=\(t) p=\(p) exceed the limits (m ≤ \(limits.maxArgon2MemoryKiB), t ≤ \(limits.maxArgon2Iterations), p ≤ \(limits.maxParallelism))"
            }
            return nil
        }
        if encoded.hasPrefix("$2a$") || encoded.hasPrefix("$2b$") || encoded.hasPrefix("$2y$") {
            guard encoded.utf8.count == 60, let cost = Int(encoded.dropFirst(4).prefix(2)), encoded.dropFirst(6).hasPrefix("$") else {
                return "a malformed bcrypt hash"
            }
            guard cost <= limits.maxBcryptCost else { return "bcrypt cost \(cost) exceeds the limit \(limits.maxBcryptCost)" }
            return nil
        }
        if encoded.hasPrefix("$7$") {
            guard let (logN, r, p) = parseScrypt7(encoded) else { return "a malformed $7$ scrypt hash" }
            guard scryptWithinLimits(logN: UInt64(logN), r: r, p: p, limits) else { return "scrypt costs exceed the limits" }
            return nil
        }
        if encoded.hasPrefix("$scrypt$") {
            guard let phc = PHCString(encoded), phc.id == "scrypt", let ln = phc.integer("ln"), let r = phc.integer("r"),
                let p = phc.integer("p"), phc.hash.count >= 16, phc.hash.count <= 128
            else { return "a malformed scrypt PHC string (its hash must be 16 to 128 bytes)" }
            guard scryptWithinLimits(logN: ln, r: r, p: p, limits) else { return "scrypt costs exceed the limits" }
            return nil
        }
        if encoded.hasPrefix(firebaseScryptPrefix) { return firebaseScryptProblem(encoded, limits) }
        if isPBKDF2SHA256(encoded) { return pbkdf2Problem(encoded, limits) }
        return "an unknown hash format (Argon2 PHC, bcrypt $2a$/$2b$/$2y$, scrypt $7$ or $scrypt$, $firebase-scrypt$, PBKDF2-SHA256 pbkdf2_sha256$ or $pbkdf2-sha256$ are read)"
    }
}
