import CLegacyHashes
import Foundation
import IdentityPorts

/// Firebase Authentication's modified scrypt (issue 22 §4), verified exactly as
/// github.com/firebase/scrypt does (`scryptenc_buf_saltlen`):
///
///     key  = scrypt(password, salt ‖ saltSeparator, N = 2^mem_cost, r = rounds, p = 1)[0..<32]
///     hash = AES-256-CTR(key, counter block starting at 16 zero bytes) of the signer key
///
/// Firebase's `rounds` is scrypt's block size `r` (it is passed as `r`, not as a repeat count).
/// Gatehouse stores one self-describing string per user:
///
///     $firebase-scrypt$ln=<mem_cost>,r=<rounds>,p=1$<saltSeparator>$<signerKey>$<salt>$<hash>
///
/// the parameters in exactly that order (decimal, `p` always 1), the four byte strings in standard
/// padded base64 as the Firebase console and `firebase auth:export` show them (the salt separator
/// and signer key are the project's "password hash parameters", salt and hash the user's
/// `salt` and `passwordHash`).
extension PasswordHashing {
    /// The `$firebase-scrypt$` prefix of the stored form.
    public static let firebaseScryptPrefix = "$firebase-scrypt$"

    /// The stored form of a user exported from Firebase (see the format above): `salt` and `hash`
    /// are the user's decoded `salt` and `passwordHash`, `saltSeparator`, `signerKey`, `rounds` and
    /// `memCost` the project's password hash parameters (base64-decoded where Firebase shows base64).
    /// Whether the result can be verified (costs within limits) is `importProblem`'s to say.
    public static func firebaseScryptString(
        salt: [UInt8], saltSeparator: [UInt8], signerKey: [UInt8], rounds: Int, memCost: Int, hash: [UInt8]
    ) -> String {
        func b64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
        return "\(firebaseScryptPrefix)ln=\(memCost),r=\(rounds),p=1$\(b64(saltSeparator))$\(b64(signerKey))$\(b64(salt))$\(b64(hash))"
    }

    /// The parts of a `$firebase-scrypt$` string.
    struct FirebaseScrypt {
        var memCost: UInt64
        var rounds: UInt64
        var saltSeparator: [UInt8]
        var signerKey: [UInt8]
        var salt: [UInt8]
        var hash: [UInt8]

        /// Largest signer key (and so hash) accepted; Firebase's are 64 bytes.
        static let maxKeyBytes = 256

        /// nil unless `encoded` is exactly the documented form.
        init?(_ encoded: String) {
            guard encoded.hasPrefix(PasswordHashing.firebaseScryptPrefix) else { return nil }
            let parts = encoded.dropFirst(PasswordHashing.firebaseScryptPrefix.count).split(separator: "$", omittingEmptySubsequences: false)
            guard parts.count == 5 else { return nil }
            let params = parts[0].split(separator: ",", omittingEmptySubsequences: false)
            guard params.count == 3, params[0].hasPrefix("ln="), params[1].hasPrefix("r="), params[2] == "p=1",
                let ln = Self.decimal(params[0].dropFirst(3)), let r = Self.decimal(params[1].dropFirst(2)),
                let separator = Self.base64(parts[1]), let key = Self.base64(parts[2]), let salt = Self.base64(parts[3]),
                let hash = Self.base64(parts[4]),
                key.count >= 16, key.count <= Self.maxKeyBytes, !salt.isEmpty, hash.count == key.count
            else { return nil }
            (memCost, rounds, saltSeparator, signerKey, self.salt, self.hash) = (ln, r, separator, key, salt, hash)
        }

        /// A plain decimal without sign or leading zeros, at most 9 digits.
        static func decimal(_ s: Substring) -> UInt64? {
            guard !s.isEmpty, s.count <= 9, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), s == "0" || !s.hasPrefix("0") else { return nil }
            return UInt64(s)
        }

        /// Canonical standard base64 with padding (what Foundation writes back), else nil.
        static func base64(_ s: Substring) -> [UInt8]? {
            guard let data = Data(base64Encoded: String(s)), data.base64EncodedString() == s else { return nil }
            return [UInt8](data)
        }
    }

    /// Why a `$firebase-scrypt$` string cannot be verified within `limits`, or nil.
    static func firebaseScryptProblem(_ encoded: String, _ limits: HashVerifyLimits) -> String? {
        guard let fb = FirebaseScrypt(encoded) else {
            return "a malformed Firebase scrypt hash (expected $firebase-scrypt$ln=<mem_cost>,r=<rounds>,p=1$<salt separator>$<signer key>$<salt>$<hash>, standard base64)"
        }
        guard fb.rounds >= 1, fb.rounds <= 8, fb.memCost >= 1, scryptWithinLimits(logN: fb.memCost, r: fb.rounds, p: 1, limits) else {
            return "Firebase scrypt costs mem_cost=\(fb.memCost) rounds=\(fb.rounds) exceed the limits (rounds 1…8, 128 × rounds × 2^mem_cost ≤ \(limits.maxScryptMemoryBytes) bytes)"
        }
        return nil
    }

    /// Whether `password` matches a `$firebase-scrypt$` string; false when malformed or over `limits`.
    static func verifyFirebaseScrypt(_ password: [UInt8], _ encoded: String, _ limits: HashVerifyLimits) -> Bool {
        guard firebaseScryptProblem(encoded, limits) == nil, let fb = FirebaseScrypt(encoded) else { return false }
        let n = UInt64(1) << fb.memCost
        let maxMemory = 128 * fb.rounds * n + 128 * fb.rounds + (1 << 20)
        var derived = [UInt8](repeating: 0, count: 32)
        let saltAndSeparator = fb.salt + fb.saltSeparator
        let ok = password.withUnsafeBytes { pwd in
            saltAndSeparator.withUnsafeBytes { salt in
                EVP_PBE_scrypt(
                    pwd.baseAddress?.assumingMemoryBound(to: CChar.self), pwd.count,
                    salt.baseAddress?.assumingMemoryBound(to: UInt8.self), salt.count,
                    n, fb.rounds, 1, maxMemory, &derived, derived.count)
            }
        }
        guard ok == 1, let computed = aes256CTR(key: derived, fb.signerKey) else { return false }
        return constantTimeEquals(computed, fb.hash)
    }

    /// AES-256-CTR of `input` with a counter block starting at 16 zero bytes (Firebase's nonce 0).
    private static func aes256CTR(key: [UInt8], _ input: [UInt8]) -> [UInt8]? {
        guard key.count == 32, let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let iv = [UInt8](repeating: 0, count: 16)
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var written: Int32 = 0
        var final: Int32 = 0
        guard EVP_EncryptInit_ex(ctx, EVP_aes_256_ctr(), nil, key, iv) == 1,
            EVP_EncryptUpdate(ctx, &output, &written, input, Int32(input.count)) == 1,
            output.withUnsafeMutableBufferPointer({ EVP_EncryptFinal_ex(ctx, $0.baseAddress! + Int(written), &final) }) == 1
        else { return nil }
        return Array(output.prefix(Int(written + final)))
    }
}
