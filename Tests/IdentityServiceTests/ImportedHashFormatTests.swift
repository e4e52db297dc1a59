import Foundation
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
@testable import IdentityService
import RPCRouting
import Testing
import IdentityPorts

/// Hashes written by the real tools users come from (issue 22 §4): passlib, bcrypt, argon2-cffi and
/// Django through python3, and Firebase's published scrypt test vectors.
@Suite struct ImportedHashFormatTests {
    /// Not NFKC-sensitive, with non-ASCII bytes, so the tools and Gatehouse hash the same bytes.
    static let password = "correct horse ✓ bätterý"
    /// Changed by NFKC (full-width letters, a ligature): other systems hashed it as typed.
    static let asTyped = "ｃｏｒｒｅｃｔ ｈｏｒｓｅ ﬁve"
    let wrong = Array("correct horse ✓ bätterY".utf8)

    /// One hash per tool and format, made once by python3 (scripts/setup installs the packages).
    static let generated: [String: String] = {
        let script = #"""
            import json, sys
            pw = sys.argv[1]
            out = {}
            from passlib.hash import pbkdf2_sha256, scrypt
            out["passlib-pbkdf2-sha256"] = pbkdf2_sha256.hash(pw)
            out["passlib-scrypt"] = scrypt.using(rounds=12).hash(pw)
            out["passlib-pbkdf2-sha256-as-typed"] = pbkdf2_sha256.hash(sys.argv[2])
            import bcrypt
            out["bcrypt"] = bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds=5)).decode()
            from argon2 import PasswordHasher, Type
            out["argon2id"] = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=2).hash(pw)
            out["argon2i"] = PasswordHasher(time_cost=2, memory_cost=4096, parallelism=1, type=Type.I).hash(pw)
            from django.conf import settings
            settings.configure()
            from django.contrib.auth.hashers import make_password
            out["django-pbkdf2-sha256"] = make_password(pw)
            print(json.dumps(out))
            """#
        guard let result = try? runProcessSync(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", script, password, asTyped]) else {
            return ["error": "cannot start python3"]
        }
        guard result.status == 0, let hashes = try? JSONDecoder().decode([String: String].self, from: Data(result.stdout.utf8)) else {
            return ["error": "python3 failed (\(result.status)): \(result.stderr.suffix(500))"]
        }
        return hashes
    }()

    @Test(arguments: [
        ("passlib-pbkdf2-sha256", "$pbkdf2-sha256$29000$"), ("passlib-scrypt", "$scrypt$ln=12,r=8,p=1$"), ("bcrypt", "$2b$05$"),
        ("argon2id", "$argon2id$v=19$m=8192,t=1,p=2$"), ("argon2i", "$argon2i$v=19$m=4096,t=2,p=1$"),
        ("django-pbkdf2-sha256", "pbkdf2_sha256$1000000$"),
    ])
    func realToolHashVerifies(tool: String, prefix: String) throws {
        let encoded = try #require(Self.generated[tool], "python3 with passlib, bcrypt, argon2-cffi and Django (scripts/setup): \(Self.generated["error"] ?? "")")
        #expect(encoded.hasPrefix(prefix))
        #expect(PasswordHashing.importProblem(encoded) == nil)
        #expect(PasswordHashing.verify(Array(Self.password.utf8), against: encoded))
        #expect(!PasswordHashing.verify(wrong, against: encoded))
        #expect(PasswordHashing.needsRehash(encoded, parameters: .testing))
    }

    // MARK: Firebase

    /// Vectors from github.com/firebase/scrypt: README.md and tests/01-known-value.sh (project key
    /// jxspr8…), tests/02-more-values-passwords.good (project key NkZlKP…); all rounds 8, mem_cost 14.
    static let firebaseVectors: [(password: String, signerKey: String, salt: String, hash: String)] = [
        ("user1password", "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==", "42xEC+ixf3L2lw==",
         "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ=="),
        ("hunter2", "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==", "42xEC+ixf3L2lw==",
         "70k8Vg5B3/OrvJOiqusnasv0dLcBHoDAqJrJr7TRLBfMw4MitWx51YXJYFdGiyMbMeKtWtLf5HiBDcN0SUOm4A=="),
        ("two space password", "NkZlKPkYEFfnbh1nYTfLsbqQnQ6jyRV4itK7iUD+hjO96tsAYhBG40BVS3AuJyiwHinqc5RR3oA+lppOXPNRmw==", "GGc/eCzFj6DM0g==",
         "5RZZm9Jz7p/u+FGXMInlJtAYFmMBj6ioL1UOdWfsUknAFCnsPpnnKRLyXSUFwwKbM4lx7TdFclBsT16Z8uuumg=="),
    ]

    static func firebaseString(_ v: (password: String, signerKey: String, salt: String, hash: String), rounds: Int = 8, memCost: Int = 14) -> String {
        PasswordHashing.firebaseScryptString(
            salt: [UInt8](Data(base64Encoded: v.salt)!), saltSeparator: [0x07], signerKey: [UInt8](Data(base64Encoded: v.signerKey)!),
            rounds: rounds, memCost: memCost, hash: [UInt8](Data(base64Encoded: v.hash)!))
    }

    @Test func firebaseStoredForm() {
        let v = Self.firebaseVectors[0]
        #expect(Self.firebaseString(v) == "$firebase-scrypt$ln=14,r=8,p=1$Bw==$\(v.signerKey)$\(v.salt)$\(v.hash)")
    }

    @Test(arguments: 0..<3) func firebaseTestVectorsVerify(index: Int) {
        let v = Self.firebaseVectors[index]
        let encoded = Self.firebaseString(v)
        #expect(PasswordHashing.importProblem(encoded) == nil)
        #expect(PasswordHashing.verify(Array(v.password.utf8), against: encoded))
        #expect(!PasswordHashing.verify(Array((v.password + "x").utf8), against: encoded))
        #expect(PasswordHashing.needsRehash(encoded, parameters: .testing))
    }

    @Test func firebaseParametersAreBoundIntoTheHash() {
        let v = Self.firebaseVectors[0]
        let password = Array(v.password.utf8)
        // Another rounds (scrypt's r), mem_cost, salt separator or signer key: no match.
        #expect(!PasswordHashing.verify(password, against: Self.firebaseString(v, rounds: 7)))
        #expect(!PasswordHashing.verify(password, against: Self.firebaseString(v, memCost: 13)))
        let otherSeparator = Self.firebaseString(v).replacingOccurrences(of: "$Bw==$", with: "$CA==$")
        #expect(!PasswordHashing.verify(password, against: otherSeparator))
        let otherSalt = Self.firebaseString(v).replacingOccurrences(of: v.salt, with: "52xEC+ixf3L2lw==")
        #expect(!PasswordHashing.verify(password, against: otherSalt))
    }

    @Test func firebaseMalformedAndOverLimitsAreRefused() {
        let v = Self.firebaseVectors[0]
        let tail = "Bw==$\(v.signerKey)$\(v.salt)$\(v.hash)"
        let malformed = [
            "$firebase-scrypt$", "$firebase-scrypt$ln=14,r=8,p=1$\(tail)$", "$firebase-scrypt$ln=14,r=8$\(tail)",
            "$firebase-scrypt$r=8,ln=14,p=1$\(tail)", "$firebase-scrypt$ln=14,r=8,p=2$\(tail)", "$firebase-scrypt$ln=014,r=8,p=1$\(tail)",
            "$firebase-scrypt$ln=-1,r=8,p=1$\(tail)", "$firebase-scrypt$ln=14,r=8,p=1$Bw$\(v.signerKey)$\(v.salt)$\(v.hash)",  // no padding
            "$firebase-scrypt$ln=14,r=8,p=1$Bw==$\(v.signerKey)$$\(v.hash)",  // no salt
            "$firebase-scrypt$ln=14,r=8,p=1$Bw==$\(v.signerKey)$\(v.salt)$\(v.salt)",  // hash shorter than the key
            "$firebase-scrypt$ln=14,r=8,p=1$Bw==$\(v.signerKey)$\(v.salt)$\(v.hash.replacingOccurrences(of: "/", with: "_"))",  // base64url
        ]
        for encoded in malformed {
            #expect(PasswordHashing.importProblem(encoded)?.contains("malformed Firebase scrypt") == true, "\(encoded)")
            #expect(!PasswordHashing.verify(Array(v.password.utf8), against: encoded))
        }
        for (rounds, memCost) in [(0, 14), (9, 14), (8, 0), (8, 19), (8, 31)] {
            let encoded = Self.firebaseString(v, rounds: rounds, memCost: memCost)
            #expect(PasswordHashing.importProblem(encoded)?.contains("exceed the limits") == true, "\(encoded)")
            #expect(!PasswordHashing.verify(Array(v.password.utf8), against: encoded))
        }
        var small = HashVerifyLimits()
        small.maxScryptMemoryBytes = 8 * 1024 * 1024  // 128 × 8 × 2^14 = 16 MiB
        #expect(PasswordHashing.importProblem(Self.firebaseString(v), limits: small) != nil)
        #expect(!PasswordHashing.verify(Array(v.password.utf8), against: Self.firebaseString(v), limits: small))
    }

    // MARK: PBKDF2

    @Test func pbkdf2MalformedAndOverLimitsAreRefused() throws {
        let django = try #require(Self.generated["django-pbkdf2-sha256"])
        let passlib = try #require(Self.generated["passlib-pbkdf2-sha256"])
        let d = django.split(separator: "$", omittingEmptySubsequences: false).map(String.init)  // pbkdf2_sha256, n, salt, hash
        let p = passlib.split(separator: "$", omittingEmptySubsequences: false).map(String.init)  // "", pbkdf2-sha256, n, salt, hash
        let malformed = [
            "pbkdf2_sha256$", "pbkdf2_sha256$\(d[1])$\(d[2])", "pbkdf2_sha256$\(d[1])$$\(d[3])", "pbkdf2_sha256$0$\(d[2])$\(d[3])",
            "pbkdf2_sha256$x\(d[1])$\(d[2])$\(d[3])", "pbkdf2_sha256$\(d[1])$\(d[2])$\(d[3].dropLast())",
            "pbkdf2_sha256$\(d[1])$\(d[2])$\(d[3])$", "pbkdf2_sha256$\(d[1])$\(d[2])$QUJD",  // hash too short
            "$pbkdf2-sha256$\(p[2])$\(p[3])", "$pbkdf2-sha256$\(p[2])$\(p[3])$\(p[4])=", "$pbkdf2-sha256$\(p[2])$\(p[3])$\(p[4].replacingOccurrences(of: ".", with: "+"))+",
            "$pbkdf2-sha256$\(p[2])$$\(p[4])", "$pbkdf2-sha256$-5$\(p[3])$\(p[4])",
        ]
        for encoded in malformed {
            #expect(PasswordHashing.importProblem(encoded)?.contains("malformed PBKDF2") == true, "\(encoded)")
            #expect(!PasswordHashing.verify(Array(Self.password.utf8), against: encoded))
        }
        var small = HashVerifyLimits()
        small.maxPBKDF2Iterations = 999_999
        #expect(PasswordHashing.importProblem(django, limits: small) == "PBKDF2 iterations 1000000 exceed the limit 999999")
        #expect(!PasswordHashing.verify(Array(Self.password.utf8), against: django, limits: small))
        #expect(PasswordHashing.importProblem("pbkdf2_sha256$2000001$\(d[2])$\(d[3])")?.contains("exceed the limit 2000000") == true)
        #expect(PasswordHashing.importProblem("$pbkdf2-sha256$999999999$\(p[3])$\(p[4])")?.contains("exceed the limit") == true)
    }

    // MARK: Sign-in

    @Test func signInWithFirebaseAndDjangoHashesRehashesToArgon2id() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let v = Self.firebaseVectors[0]
        let firebase = try makeUser("firebase@example.com", hash: Self.firebaseString(v))
        try await h.store.insert(firebase)
        await #expect(throws: (any Error).self) {
            _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "firebase@example.com", password: "user1passwore"))
        }
        #expect(try await h.store.user(id: firebase.id)?.passwordHash == Self.firebaseString(v))
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "firebase@example.com", password: v.password))
        #expect(try await h.store.user(id: firebase.id)?.passwordHash?.hasPrefix("$argon2id$v=19$m=1024,t=1,p=1$") == true)

        guard let djangoHash = Self.generated["django-pbkdf2-sha256"] else {
            Issue.record("Django made no pbkdf2_sha256 hash")
            return
        }
        let django = try makeUser("django@example.com", hash: djangoHash)
        try await h.store.insert(django)
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "django@example.com", password: Self.password))
        #expect(try await h.store.user(id: django.id)?.passwordHash?.hasPrefix("$argon2id$v=19$m=1024,t=1,p=1$") == true)
    }

    @Test func signInWithAPasswordNFKCChangesMatchesTheHashMadeAsTyped() async throws {
        #expect(PasswordPolicy.normalize(Self.asTyped) == "correct horse five")
        let h = try await Harness()
        defer { h.cleanup() }
        guard let typedHash = Self.generated["passlib-pbkdf2-sha256-as-typed"] else {
            Issue.record("passlib made no pbkdf2-sha256 hash")
            return
        }
        let user = try makeUser("typed@example.com", hash: typedHash)
        try await h.store.insert(user)
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "typed@example.com", password: Self.asTyped))
        #expect(try await h.store.user(id: user.id)?.passwordHash?.hasPrefix("$argon2id$") == true)
        _ = try await h.caller.call(IdentityAPI.signIn, SignInRequest(email: "typed@example.com", password: Self.asTyped))
    }

    @Test func unknownFormatMessageNamesTheNewFormats() {
        let problem = PasswordHashing.importProblem("pbkdf2_sha1$1000$salt$aGFzaA==")
        #expect(problem?.contains("$firebase-scrypt$") == true)
        #expect(problem?.contains("pbkdf2_sha256$") == true)
    }
}
