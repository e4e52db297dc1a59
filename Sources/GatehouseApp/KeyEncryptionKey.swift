import Crypto
import Foundation
import TokenPorts
import SQLiteStores
import Logging
import TokenService

/// The key that seals the token service's signing keys at rest. Configured as a file
/// (`GATEHOUSE_KEY_ENCRYPTION_KEY_FILE`, a compose secret in the deployment), or else kept in
/// its own 0600 file in the data folder, made on first start: a copied database or a backup
/// (which holds only the databases) then leaks no signing key.
public enum KeyEncryptionKey {
    /// The file name of the key made on first start, in the data folder.
    public static let defaultFileName = "key-encryption.key"

    /// A new random key and its file text (base64 and a newline), as `keys generate` and the
    /// first start write it.
    static func newKey() -> (key: SymmetricKey, text: String) {
        let key = SymmetricKey(size: .bits256)
        return (key, key.withUnsafeBytes { Data($0).base64EncodedString() } + "\n")
    }

    /// The key in the file at `path`; when there is none, a new one written there (0600), unless
    /// the database at `databasePath` already holds secrets sealed with some other key: then
    /// making a new key would lock them away, and start-up stops with what to do.
    static func loadOrCreate(at path: String, databasePath: String, logger: Logger) throws -> SymmetricKey {
        if FileManager.default.fileExists(atPath: path) { return try TokenRoleSettings.readKey(path, source: "the key-encryption key made on first start") }
        if try SQLiteTokenStore.holdsSealedSecrets(path: databasePath) {
            throw ConfigError(message: "\(databasePath) holds signing keys sealed with a key-encryption key, but \(path) does not exist and GATEHOUSE_KEY_ENCRYPTION_KEY_FILE (--key-encryption-key-file) is not set: point it at the key used before, or see \"Recovering from a lost key\" in docs/operators/backups.md")
        }
        let key = try make(at: path)
        logger.notice("made a key-encryption key at \(path) (0600); it seals the signing keys: back it up apart from the databases")
        return key
    }

    /// A new key written to a new file at `path` (0600; its folder made 0700 when missing).
    static func make(at path: String) throws -> SymmetricKey {
        let (key, text) = newKey()
        let file = URL(fileURLWithPath: path)
        do {
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try KeySet.writeFile(text, to: file, mode: 0o600)
        } catch {
            throw ConfigError(message: "\(error)")
        }
        return key
    }

    /// `gatehouse keys rotate-encryption-key`: re-seals the token database's secrets in `dataDir`
    /// with the key in `newKeyFile`, opening them with the key in `oldKeyFile` (default: the
    /// data folder's `key-encryption.key`). With `oldKeyLost`, secrets that cannot be opened are
    /// deleted instead: the next start makes a new signing key (access tokens signed before
    /// stop verifying; refresh tokens keep working). Run it with the token service stopped.
    /// Returns the report to print.
    public static func rotate(dataDir: String, oldKeyFile: String?, newKeyFile: String, oldKeyLost: Bool) throws -> String {
        let folder = URL(fileURLWithPath: dataDir)
        let databasePath = folder.appendingPathComponent("token.sqlite").path
        let oldPath = oldKeyFile ?? folder.appendingPathComponent(defaultFileName).path
        let oldKey = oldKeyLost ? nil : try TokenRoleSettings.readKey(oldPath, source: oldKeyFile == nil ? "the old key (default \(defaultFileName))" : "--old-key-file")
        let newKey = try TokenRoleSettings.readKey(newKeyFile, source: "--new-key-file")
        let report: SQLiteTokenStore.RewrapReport
        do {
            report = try SQLiteTokenStore.rewrap(path: databasePath, oldKey: oldKey, newKey: newKey, discardUnreadable: oldKeyLost)
        } catch let error as SQLiteTokenStore.RewrapError {
            throw ConfigError(message: error.description)
        }
        var lines = ["Re-sealed \(report.keys) signing key(s) of \(databasePath) with \(newKeyFile)."]
        if report.discardedKeys > 0 || report.discardedSecret {
            lines.append("Deleted \(report.discardedKeys) signing key(s)\(report.discardedSecret ? " and the refresh secret" : "") that the old key could not open; the next start makes new ones.")
        }
        lines.append("Now set GATEHOUSE_KEY_ENCRYPTION_KEY_FILE=\(newKeyFile) (or move it to \(folder.appendingPathComponent(defaultFileName).path)) and start the token service.")
        return lines.joined(separator: "\n")
    }
}
