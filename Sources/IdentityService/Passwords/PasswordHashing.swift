import CArgon2
import CLegacyHashes
import Foundation
import IdentityPorts
import IdentityCore

/// Argon2id cost parameters.
public struct Argon2Parameters: Sendable, Hashable {
    /// Memory in KiB (`m`).
    public var memoryKiB: UInt32
    /// Passes (`t`).
    public var iterations: UInt32
    /// Lanes (`p`).
    public var parallelism: UInt32
    /// Random salt bytes per hash (16).
    public var saltLength: Int
    /// Bytes of the derived hash (32).
    public var hashLength: Int

    /// Parameters with the given costs; salt and hash lengths default to 16 and 32 bytes.
    public init(memoryKiB: UInt32, iterations: UInt32, parallelism: UInt32 = 1, saltLength: Int = 16, hashLength: Int = 32) {
        self.memoryKiB = memoryKiB
        self.iterations = iterations
        self.parallelism = parallelism
        self.saltLength = saltLength
        self.hashLength = hashLength
    }

    /// OWASP's recommendation: m = 19 MiB, t = 2, p = 1.
    public static let owasp = Argon2Parameters(memoryKiB: 19 * 1024, iterations: 2, parallelism: 1)
    /// Cheap parameters for tests only.
    public static let testing = Argon2Parameters(memoryKiB: 1024, iterations: 1, parallelism: 1)
}

/// Bounds on the cost of verifying an imported hash, so a hostile or odd hash cannot take the
/// machine's memory or minutes of CPU.
public struct HashVerifyLimits: Sendable, Hashable {
    /// Largest Argon2 memory cost (`m`, KiB) an imported hash may ask for.
    public var maxArgon2MemoryKiB: UInt64 = 256 * 1024
    /// Largest Argon2 time cost (`t`) an imported hash may ask for.
    public var maxArgon2Iterations: UInt64 = 16
    /// Largest Argon2 lane count (`p`) an imported hash may ask for.
    public var maxParallelism: UInt64 = 16
    /// Largest bcrypt cost (log2 rounds) an imported hash may ask for.
    public var maxBcryptCost: Int = 14
    /// scrypt needs 128 × r × N bytes.
    public var maxScryptMemoryBytes: UInt64 = 256 * 1024 * 1024
    /// Largest PBKDF2 iteration count an imported hash may ask for (Django 5.2 writes 1,000,000).
    public var maxPBKDF2Iterations: UInt64 = 2_000_000
    /// The default bounds.
    public init() {}
}

/// Synchronous password hashing primitives. Call them on a `HashPool` thread, never on the
/// cooperative pool: an Argon2id hash with OWASP parameters takes ~30 ms and 19 MiB.
public enum PasswordHashing {
    /// Hashes `password` (bytes of the NFKC form) with Argon2id; returns a PHC string.
    public static func argon2idHash(_ password: [UInt8], parameters: Argon2Parameters) throws -> String {
        var salt = [UInt8](repeating: 0, count: parameters.saltLength)
        var rng = SystemRandomNumberGenerator()
        for i in salt.indices { salt[i] = rng.next() }
        let length = argon2_encodedlen(
            parameters.iterations, parameters.memoryKiB, parameters.parallelism, UInt32(parameters.saltLength),
            UInt32(parameters.hashLength), Argon2_id)
        var encoded = [CChar](repeating: 0, count: length + 1)
        let rc = password.withUnsafeBytes { pwd in
            salt.withUnsafeBytes { saltBytes in
                argon2id_hash_encoded(
                    parameters.iterations, parameters.memoryKiB, parameters.parallelism,
                    pwd.baseAddress, pwd.count, saltBytes.baseAddress, saltBytes.count, parameters.hashLength,
                    &encoded, encoded.count)
            }
        }
        guard rc == ARGON2_OK.rawValue else {
            throw IdentityError.storage(cause: "argon2id_hash_encoded: \(String(cString: argon2_error_message(rc)))")
        }
        return encoded.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Whether `password` matches `encoded`: Argon2id/i/d PHC strings, bcrypt (`$2a$`, `$2b$`,
    /// `$2y$`), scrypt (`$7$` as written by libxcrypt, or passlib's `$scrypt$ln=..,r=..,p=..$salt$hash`),
    /// Firebase's modified scrypt (`$firebase-scrypt$`) and PBKDF2-SHA256 (Django's `pbkdf2_sha256$`,
    /// passlib's `$pbkdf2-sha256$`).
    /// An unknown or malformed hash, or one over `limits`, never matches.
    public static func verify(_ password: [UInt8], against encoded: String, limits: HashVerifyLimits = HashVerifyLimits()) -> Bool {
        if encoded.hasPrefix("$argon2") { return verifyArgon2(password, encoded, limits) }
        if encoded.hasPrefix("$2a$") || encoded.hasPrefix("$2b$") || encoded.hasPrefix("$2y$") {
            guard let cost = Int(encoded.dropFirst(4).prefix(2)), cost <= limits.maxBcryptCost else { return false }
            return verifyCrypt(password, encoded)
        }
        if encoded.hasPrefix("$7$") {
            guard let (logN, r, p) = parseScrypt7(encoded), scryptWithinLimits(logN: UInt64(logN), r: r, p: p, limits) else { return false }
            return verifyCrypt(password, encoded)
        }
        if encoded.hasPrefix("$scrypt$") { return verifyScryptPHC(password, encoded, limits) }
        if encoded.hasPrefix(firebaseScryptPrefix) { return verifyFirebaseScrypt(password, encoded, limits) }
        if isPBKDF2SHA256(encoded) { return verifyPBKDF2(password, encoded, limits) }
        return false
    }

    /// Whether `encoded` should be replaced by a fresh Argon2id hash with `parameters`: any other
    /// algorithm, version or parameters.
    public static func needsRehash(_ encoded: String, parameters: Argon2Parameters) -> Bool {
        guard let phc = PHCString(encoded), phc.id == "argon2id" else { return true }
        return phc.version != 19
            || phc.integer("m") != UInt64(parameters.memoryKiB)
            || phc.integer("t") != UInt64(parameters.iterations)
            || phc.integer("p") != UInt64(parameters.parallelism)
            || phc.salt.count != parameters.saltLength
            || phc.hash.count != parameters.hashLength
    }

    /// A well-formed Argon2id hash of nothing anyone knows, with `parameters`: verifying against it
    /// costs what a real verification costs (used for unknown emails).
    public static func dummyHash(parameters: Argon2Parameters) -> String {
        var rng = SystemRandomNumberGenerator()
        let salt = (0..<parameters.saltLength).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let hash = (0..<parameters.hashLength).map { _ in UInt8.random(in: 0...255, using: &rng) }
        return PHCString(
            id: "argon2id", version: 19,
            parameters: [.init("m", "\(parameters.memoryKiB)"), .init("t", "\(parameters.iterations)"), .init("p", "\(parameters.parallelism)")],
            salt: salt, hash: hash
        ).description
    }

    // MARK: Argon2

    private static func verifyArgon2(_ password: [UInt8], _ encoded: String, _ limits: HashVerifyLimits) -> Bool {
        guard let phc = PHCString(encoded), let m = phc.integer("m"), let t = phc.integer("t"), let p = phc.integer("p"),
            m <= limits.maxArgon2MemoryKiB, t <= limits.maxArgon2Iterations, p <= limits.maxParallelism
        else { return false }
        let type: argon2_type
        switch phc.id {
        case "argon2id": type = Argon2_id
        case "argon2i": type = Argon2_i
        case "argon2d": type = Argon2_d
        default: return false
        }
        let rc = password.withUnsafeBytes { pwd in
            argon2_verify(encoded, pwd.baseAddress, pwd.count, type)
        }
        return rc == ARGON2_OK.rawValue
    }

    // MARK: crypt(3): bcrypt and $7$ scrypt

    private static func verifyCrypt(_ password: [UInt8], _ encoded: String) -> Bool {
        // crypt takes C strings: a NUL would silently cut the password short.
        guard !password.contains(0), encoded.utf8.count < 512 else { return false }
        guard let data = calloc(1, MemoryLayout<crypt_data>.size)?.assumingMemoryBound(to: crypt_data.self) else { return false }
        defer { free(data) }
        let cPassword = password.map { CChar(bitPattern: $0) } + [0]
        guard let result = crypt_r(cPassword, encoded, data) else { return false }
        let computed = Array(String(cString: result).utf8)
        return constantTimeEquals(computed, Array(encoded.utf8)) && computed.first == UInt8(ascii: "$")
    }

    private static let itoa64 = Array("./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)

    /// (log2 N, r, p) of a `$7$` hash.
    static func parseScrypt7(_ encoded: String) -> (Int, UInt64, UInt64)? {
        let bytes = Array(encoded.utf8)
        guard bytes.count > 14, let logN = itoa64.firstIndex(of: bytes[3]) else { return nil }
        func decode30(_ slice: ArraySlice<UInt8>) -> UInt64? {
            var value: UInt64 = 0
            for (i, c) in slice.enumerated() {
                guard let v = itoa64.firstIndex(of: c) else { return nil }
                value |= UInt64(v) << (6 * UInt64(i))
            }
            return value
        }
        guard let r = decode30(bytes[4..<9]), let p = decode30(bytes[9..<14]) else { return nil }
        return (logN, r, p)
    }

    // MARK: passlib scrypt through OpenSSL

    private static func verifyScryptPHC(_ password: [UInt8], _ encoded: String, _ limits: HashVerifyLimits) -> Bool {
        guard let phc = PHCString(encoded), phc.id == "scrypt", let ln = phc.integer("ln"), let r = phc.integer("r"),
            let p = phc.integer("p"), scryptWithinLimits(logN: ln, r: r, p: p, limits), phc.hash.count >= 16, phc.hash.count <= 128
        else { return false }
        var key = [UInt8](repeating: 0, count: phc.hash.count)
        let n = UInt64(1) << ln
        let maxMemory = 128 * r * n * p + 128 * r * n + (1 << 20)
        let ok = password.withUnsafeBytes { pwd in
            phc.salt.withUnsafeBytes { salt in
                EVP_PBE_scrypt(
                    pwd.baseAddress?.assumingMemoryBound(to: CChar.self), pwd.count,
                    salt.baseAddress?.assumingMemoryBound(to: UInt8.self), salt.count,
                    n, r, p, maxMemory, &key, key.count)
            }
        }
        return ok == 1 && constantTimeEquals(key, phc.hash)
    }

    static func scryptWithinLimits(logN: UInt64, r: UInt64, p: UInt64, _ limits: HashVerifyLimits) -> Bool {
        guard logN >= 1, logN <= 30, r >= 1, r <= 1024, p >= 1, p <= limits.maxParallelism else { return false }
        return 128 * r * (UInt64(1) << logN) <= limits.maxScryptMemoryBytes
    }

    /// Compares without an early exit.
    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in a.indices { diff |= a[i] ^ b[i] }
        return diff == 0
    }
}
