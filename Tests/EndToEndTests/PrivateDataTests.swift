import Foundation
import GatehouseTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Private data: file modes whatever the umask, signing keys sealed at rest (processes)")
struct PrivateDataTests {
    static func mode(_ path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    /// Every regular file of `folder` with its mode.
    static func modes(_ folder: URL) -> [String: Int] {
        var modes: [String: Int] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
            var isDirectory: ObjCBool = false
            let path = folder.appendingPathComponent(name).path
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue { modes[name] = mode(path) }
        }
        return modes
    }

    static func activeKid(_ stack: Stack) async throws -> String? {
        let keys = try await stack.request("GET", "/.well-known/jwks.json").json["keys"] as? [[String: Any]]
        return keys?.first?["kid"] as? String
    }

    @Test("serve: a world-readable data folder and files are narrowed (0700/0600) with a warning; new files and WAL are 0600; no private key is stored in the clear")
    func privateFiles() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let fm = FileManager.default
        try fm.createDirectory(at: stack.dataDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        // An existing database left world-readable (an empty file is an empty database).
        let identity = stack.dataDir.appendingPathComponent("identity.sqlite")
        #expect(fm.createFile(atPath: identity.path, contents: nil, attributes: [.posixPermissions: 0o644]))
        try stack.start("serve", captureLog: true)
        try await stack.waitReady()
        let signUp = try await stack.request("POST", "/v1/accounts", json: ["email": "private@example.com", "password": "correct horse battery"])
        #expect(signUp.status == 201)

        #expect(Self.mode(stack.dataDir.path) == 0o700)
        let modes = Self.modes(stack.dataDir)
        for name in ["identity.sqlite", "identity.sqlite-wal", "identity.sqlite-shm", "token.sqlite", "token.sqlite-wal", "token.sqlite-shm", "key-encryption.key"] {
            #expect(modes[name] == 0o600, "\(name): \(modes[name].map { String($0, radix: 8) } ?? "missing")")
        }
        #expect(modes.values.allSatisfy { $0 == 0o600 }, "\(modes)")
        let log = stack.log(of: "serve")
        #expect(log.contains("made data private that others could read") && log.contains("identity.sqlite: 0644 → 0600"), "\(log)")
        // The signing key is sealed: its PEM is nowhere in the database or its WAL.
        var bytes = Data()
        for name in ["token.sqlite", "token.sqlite-wal"] { bytes.append((try? Data(contentsOf: stack.dataDir.appendingPathComponent(name))) ?? Data()) }
        #expect(!bytes.isEmpty && bytes.range(of: Data("PRIVATE KEY".utf8)) == nil)
    }

    @Test("serve: without its key-encryption key start-up stops and says what to do; after rotation to a new key the same signing key serves")
    func missingKeyAndRotation() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("serve")
        try await stack.waitReady()
        let kid = try await Self.activeKid(stack)
        #expect(kid != nil)
        let signUp = try await stack.request("POST", "/v1/accounts", json: ["email": "rotate@example.com", "password": "correct horse battery"])
        let refresh = (signUp.json["session"] as? [String: Any])?["refreshToken"] as? String
        await stack.kill("serve", signal: SIGTERM)

        // The key file is moved away (say, a data folder restored without it).
        let aside = try TemporaryDirectory(prefix: "gh-kek")
        defer { aside.remove() }
        let oldKey = aside.url.appendingPathComponent("old.key")
        try FileManager.default.moveItem(at: stack.dataDir.appendingPathComponent("key-encryption.key"), to: oldKey)
        let refused = try await runProcess(try gatehouseBinary(), ["serve"], environment: stack.environment)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("Recovering from a lost key") && refused.stderr.contains("GATEHOUSE_KEY_ENCRYPTION_KEY_FILE"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: stack.dataDir.appendingPathComponent("key-encryption.key").path), "no new key replaced the lost one")

        // Rotation: a wrong old key changes nothing; the right one re-seals under the new key.
        let newKey = aside.url.appendingPathComponent("new.key")
        try Data((0..<32).map { UInt8($0) }).base64EncodedString().write(to: newKey, atomically: true, encoding: .utf8)
        let wrong = try await runProcess(
            try gatehouseBinary(), ["keys", "rotate-encryption-key", "--data-dir", stack.dataDir.path, "--old-key-file", newKey.path, "--new-key-file", newKey.path])
        #expect(wrong.status != 0 && wrong.stderr.contains("nothing was changed"), "\(wrong.stderr)")
        let missing = try await runProcess(
            try gatehouseBinary(), ["keys", "rotate-encryption-key", "--data-dir", stack.dataDir.path, "--old-key-file", oldKey.path,
                                    "--new-key-file", aside.url.appendingPathComponent("nope.key").path])
        #expect(missing.status != 0 && missing.stderr.contains("--new-key-file: cannot read the file"), "\(missing.stderr)")
        let rotate = try await runProcess(
            try gatehouseBinary(), ["keys", "rotate-encryption-key", "--data-dir", stack.dataDir.path, "--old-key-file", oldKey.path, "--new-key-file", newKey.path])
        #expect(rotate.status == 0 && rotate.stdout.contains("Re-sealed 1 signing key"), "\(rotate.stdout) \(rotate.stderr)")
        try stack.start("serve", environment: ["GATEHOUSE_KEY_ENCRYPTION_KEY_FILE": newKey.path])
        try await stack.waitReady()
        #expect(try await Self.activeKid(stack) == kid)
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": refresh ?? ""])
        #expect(refreshed.status == 200)
    }
}
