import CLegacyHashes
import Foundation
import IdentityPorts

/// PBKDF2-HMAC-SHA256 hashes (issue 22 §4) in the two forms tools write:
///
/// - Django: `pbkdf2_sha256$<iterations>$<salt>$<hash>`, the salt used as its UTF-8 text, the hash
///   in standard padded base64;
/// - passlib: `$pbkdf2-sha256$<iterations>$<salt>$<hash>`, salt and hash in passlib's "adapted"
///   base64 (`.` for `+`, no padding).
///
/// The derived key is as long as the stored hash (32 bytes for both tools; 16…64 accepted).
extension PasswordHashing {
    /// The parts of a PBKDF2-SHA256 hash.
    struct PBKDF2SHA256 {
        var iterations: UInt64
        var salt: [UInt8]
        var hash: [UInt8]

        /// nil unless `encoded` is one of the two forms, well formed.
        init?(_ encoded: String) {
            let parts: [Substring]
            let django: Bool
            if encoded.hasPrefix("pbkdf2_sha256$") {
                parts = encoded.dropFirst("pbkdf2_sha256$".count).split(separator: "$", omittingEmptySubsequences: false)
                django = true
            } else if encoded.hasPrefix("$pbkdf2-sha256$") {
                parts = encoded.dropFirst("$pbkdf2-sha256$".count).split(separator: "$", omittingEmptySubsequences: false)
                django = false
            } else {
                return nil
            }
            guard parts.count == 3, let iterations = FirebaseScrypt.decimal(parts[0]), iterations >= 1, !parts[1].isEmpty else { return nil }
            let salt: [UInt8]? = django ? Array(parts[1].utf8) : Self.adaptedBase64(parts[1])
            let hash: [UInt8]? = django ? FirebaseScrypt.base64(parts[2]) : Self.adaptedBase64(parts[2])
            guard let salt, let hash, !salt.isEmpty, (16...64).contains(hash.count) else { return nil }
            (self.iterations, self.salt, self.hash) = (iterations, salt, hash)
        }

        /// passlib's ab64: base64 with `.` for `+`, padding left off.
        static func adaptedBase64(_ s: Substring) -> [UInt8]? {
            guard s.utf8.allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "=") }), s.count % 4 != 1 else { return nil }
            var standard = s.replacingOccurrences(of: ".", with: "+")
            standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
            return Data(base64Encoded: standard).map { [UInt8]($0) }
        }
    }

    /// Whether `encoded` is a PBKDF2-SHA256 hash in Django's or passlib's form.
    static func isPBKDF2SHA256(_ encoded: String) -> Bool {
        encoded.hasPrefix("pbkdf2_sha256$") || encoded.hasPrefix("$pbkdf2-sha256$")
    }

    /// Why a PBKDF2-SHA256 hash cannot be verified within `limits`, or nil.
    static func pbkdf2Problem(_ encoded: String, _ limits: HashVerifyLimits) -> String? {
        guard let parsed = PBKDF2SHA256(encoded) else {
            return "a malformed PBKDF2-SHA256 hash (expected Django's pbkdf2_sha256$<iterations>$<salt>$<base64 hash> or passlib's $pbkdf2-sha256$<iterations>$<salt>$<hash>)"
        }
        guard parsed.iterations <= limits.maxPBKDF2Iterations else {
            return "PBKDF2 iterations \(parsed.iterations) exceed the limit \(limits.maxPBKDF2Iterations)"
        }
        return nil
    }

    /// Whether `password` matches a PBKDF2-SHA256 hash; false when malformed or over `limits`.
    static func verifyPBKDF2(_ password: [UInt8], _ encoded: String, _ limits: HashVerifyLimits) -> Bool {
        guard let parsed = PBKDF2SHA256(encoded), parsed.iterations <= limits.maxPBKDF2Iterations, parsed.iterations <= UInt64(Int32.max) else {
            return false
        }
        var key = [UInt8](repeating: 0, count: parsed.hash.count)
        let ok = password.withUnsafeBytes { pwd in
            parsed.salt.withUnsafeBytes { salt in
                PKCS5_PBKDF2_HMAC(
                    pwd.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(pwd.count),
                    salt.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(salt.count),
                    Int32(parsed.iterations), EVP_sha256(), Int32(key.count), &key)
            }
        }
        return ok == 1 && constantTimeEquals(key, parsed.hash)
    }
}
