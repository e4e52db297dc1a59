import Foundation
import ZeroMQ
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `gatehouse keys generate`: a fresh set of CURVE key pairs for the three roles, their allow
/// lists, and a key-encryption key, as files named after the compose secrets that carry them.
public enum KeySet {
    /// One file of a key set.
    public struct File: Sendable, Equatable {
        /// The file's name in the key-set folder, e.g. `identity.key`.
        public var name: String
        /// POSIX mode: 0600 for secrets, 0644 for public keys and allow lists.
        public var mode: mode_t
        /// The docker-compose secret that carries it (nil: not needed by any container).
        public var composeSecret: String?
        /// Which configuration key takes its path, for the report.
        public var configKey: String?
    }

    /// The files `generate` writes, in order.
    public static let files: [File] = [
        File(name: "identity.key", mode: 0o600, composeSecret: "identity_curve_key", configKey: "GATEHOUSE_CURVE_SECRET_KEY_FILE (identity)"),
        File(name: "token.key", mode: 0o600, composeSecret: "token_curve_key", configKey: "GATEHOUSE_CURVE_SECRET_KEY_FILE (token)"),
        File(name: "gateway.key", mode: 0o600, composeSecret: "gateway_curve_key", configKey: "GATEHOUSE_CURVE_SECRET_KEY_FILE (gateway)"),
        File(name: "identity.pub", mode: 0o644, composeSecret: "identity_curve_pub", configKey: "GATEHOUSE_IDENTITY_PUBLIC_KEY_FILE (token, gateway)"),
        File(name: "token.pub", mode: 0o644, composeSecret: "token_curve_pub", configKey: "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE (identity, gateway)"),
        File(name: "gateway.pub", mode: 0o644, composeSecret: nil, configKey: nil),
        File(name: "identity.allow", mode: 0o644, composeSecret: "identity_curve_allow", configKey: "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE (identity)"),
        File(name: "token.allow", mode: 0o644, composeSecret: "token_curve_allow", configKey: "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE (token)"),
        File(name: "key-encryption.key", mode: 0o600, composeSecret: "key_encryption_key", configKey: "GATEHOUSE_KEY_ENCRYPTION_KEY_FILE (token)"),
    ]

    /// Why a key set was not written (the folder is a file,
    /// a file exists without `force`, a write failed).
    public struct Error: Swift.Error, CustomStringConvertible {
        /// The reason, as one line for the operator.
        public let description: String
    }

    /// The key-encryption key's file: never replaced by `generate` (issue 35). Replacing it would
    /// lock away every signing key sealed with the old one; `gatehouse keys rotate-encryption-key`
    /// re-seals them instead.
    public static let keyEncryptionKeyFile = "key-encryption.key"

    /// Writes a new key set into `directory` (created with mode 0700 if missing). Refuses to
    /// overwrite any existing file unless `force`; then nothing is written. With `force` the CURVE
    /// files are rewritten in place (their owner and mode kept), and an existing
    /// `key-encryption.key` is kept as it is. Returns the files written.
    @discardableResult
    public static func generate(into directory: URL, force: Bool) throws -> [File] {
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        if fm.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw Error(description: "\(directory.path) exists and is not a folder") }
        } else {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        if !force {
            let existing = files.filter { fm.fileExists(atPath: directory.appendingPathComponent($0.name).path) }
            if !existing.isEmpty {
                throw Error(
                    description: "refusing to overwrite \(existing.map(\.name).joined(separator: ", ")) in \(directory.path); pass --force to replace the CURVE key pairs and allow lists (rotation of the service links: restart every role afterwards). An existing \(keyEncryptionKeyFile) is always kept: rotate it with `gatehouse keys rotate-encryption-key`")
            }
        }
        let identity = try CurveKeyPair.generate()
        let token = try CurveKeyPair.generate()
        let gateway = try CurveKeyPair.generate()
        let contents: [String: String] = [
            "identity.key": identity.secretKeyZ85 + "\n",
            "token.key": token.secretKeyZ85 + "\n",
            "gateway.key": gateway.secretKeyZ85 + "\n",
            "identity.pub": identity.publicKeyZ85 + "\n",
            "token.pub": token.publicKeyZ85 + "\n",
            "gateway.pub": gateway.publicKeyZ85 + "\n",
            "identity.allow": """
                # Clients the identity service accepts (GATEHOUSE_CURVE_ALLOWED_KEYS_FILE).
                # token service
                \(token.publicKeyZ85)
                # gateway
                \(gateway.publicKeyZ85)

                """,
            "token.allow": """
                # Clients the token service accepts (GATEHOUSE_CURVE_ALLOWED_KEYS_FILE).
                # identity service
                \(identity.publicKeyZ85)
                # gateway
                \(gateway.publicKeyZ85)

                """,
            "key-encryption.key": KeyEncryptionKey.newKey().text,
        ]
        var written: [File] = []
        for file in files {
            let url = directory.appendingPathComponent(file.name)
            if file.name == keyEncryptionKeyFile, fm.fileExists(atPath: url.path) { continue }
            try writeFile(contents[file.name]!, to: url, mode: file.mode)
            written.append(file)
        }
        return written
    }

    /// Writes `text` to `url` with exactly `mode` (not widened by the umask, fixed on an existing file).
    static func writeFile(_ text: String, to url: URL, mode: mode_t) throws {
        let fd = open(url.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw Error(description: "cannot write \(url.path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fchmod(fd, mode) == 0 else { throw Error(description: "cannot set the mode of \(url.path): \(String(cString: strerror(errno)))") }
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Error(description: "cannot write \(url.path): \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }

    /// What `gatehouse keys generate` prints: the files, their modes and compose secrets. Never
    /// any key material.
    public static func report(_ written: [File], directory: URL) -> String {
        var lines = ["Wrote a CURVE key set to \(directory.path):"]
        for file in written {
            let mode = String(file.mode, radix: 8)
            var line = "  \(file.name.padding(toLength: 19, withPad: " ", startingAt: 0)) 0\(mode)"
            if let secret = file.composeSecret { line += "  compose secret \(secret)" }
            if let key = file.configKey { line += "  → \(key)" }
            lines.append(line)
        }
        if !written.contains(where: { $0.name == keyEncryptionKeyFile }) {
            lines.append("  \(keyEncryptionKeyFile.padding(toLength: 19, withPad: " ", startingAt: 0)) kept as it was (it seals the signing keys; rotate it with `gatehouse keys rotate-encryption-key`)")
        }
        lines.append("Secret keys (*.key) stay 0600 and must never be committed or logged. Rotating the CURVE keys means `--force` and restarting all three roles.")
        return lines.joined(separator: "\n")
    }
}
