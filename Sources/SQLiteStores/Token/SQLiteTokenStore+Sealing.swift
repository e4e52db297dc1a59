import Crypto
import Foundation
import TokenCore
import GRDB
import TokenPorts
import SQLiteSupport

/// Secrets at rest: the signing keys' private halves and the refresh-successor secret, sealed
/// with the key-encryption key (AES-GCM) so that a copied database or backup alone leaks neither.
extension SQLiteTokenStore {
    /// Replaces the stored secret `name` with `value`, overwriting the old bytes in the file.
    public func replaceSecret(named name: String, with value: Data) async throws {
        try await write { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            try db.execute(sql: "UPDATE meta SET value = ? WHERE name = ?", arguments: [value, name])
        }
    }

    /// After secrets were replaced with `secure_delete` on: copies the WAL into the database
    /// and truncates it, so the old page images (with the old bytes) leave the `-wal` file too.
    /// A checkpoint that another one holds up (the store's own `WALCheckpointer`, or another
    /// connection's) answers busy at once, without SQLite's busy wait: it is tried again for up to
    /// about a second before start-up fails.
    public func scrubFreedPages() async throws {
        var attempt = 0
        while true {
            do {
                _ = try await pool.writeWithoutTransaction { try $0.checkpoint(.truncate) }
                return
            } catch where SQLiteFiles.isBusy(error) && attempt < 100 {
                attempt += 1
                try await Task.sleep(for: .milliseconds(10))
            } catch {
                throw translate(error)
            }
        }
    }

    /// Seals every signing key stored in plain text with `seal`; returns how many it sealed.
    /// The plain text is overwritten in the file, not only unlinked (`scrubFreedPages`).
    public func sealPlaintextKeys(_ seal: @escaping @Sendable (Data) throws -> Data) async throws -> Int {
        try await write { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            let rows = try Row.fetchAll(db, sql: "SELECT kid, private_key FROM signingKey WHERE encrypted = 0")
            for row in rows {
                let plain: Data = row["private_key"]
                try db.execute(
                    sql: "UPDATE signingKey SET private_key = ?, encrypted = 1 WHERE kid = ?",
                    arguments: [try seal(plain), row["kid"] as String])
            }
            return rows.count
        }
    }

    /// Whether the database at `path` holds any secret sealed with a key-encryption key. False
    /// when there is no database yet. Opens it read-only, runs no migration.
    public static func holdsSealedSecrets(path: String) throws -> Bool {
        guard FileManager.default.fileExists(atPath: path) else { return false }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "token-sealed-check"
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db in
            guard try db.tableExists("signingKey"), try db.tableExists("meta") else { return false }
            let keys = try Int.fetchOne(db, sql: "SELECT count(*) FROM signingKey WHERE encrypted = 1") ?? 0
            let secret = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = ?", arguments: [TokenSecrets.successorName])
            return keys > 0 || (secret.map { $0.count != TokenSecrets.plainLength } ?? false)
        }
    }

    /// What `rewrap` did.
    public struct RewrapReport: Sendable, Equatable {
        /// Signing keys now sealed with the new key.
        public var keys = 0
        /// Signing keys deleted because they did not open with the old key (`discardUnreadable`).
        public var discardedKeys = 0
        /// Whether the refresh-successor secret was dropped (a new one is made at the next start).
        public var discardedSecret = false
    }

    /// Re-seals every secret of the database at `path` with `seal`, opening each with `open`
    /// (which returns nil when the secret does not open). With `discardUnreadable`, secrets that
    /// do not open are deleted (a lost key-encryption key); otherwise nothing changes and it
    /// throws. One transaction: all or nothing. Run it with the token service stopped, on a
    /// database this version's token service has migrated (it throws otherwise, changing nothing).
    public static func rewrap(
        path: String, discardUnreadable: Bool,
        open: (_ sealed: Data, _ isSealed: Bool) -> Data?, seal: (Data) throws -> Data
    ) throws -> RewrapReport {
        guard FileManager.default.fileExists(atPath: path) else {
            throw RewrapError(description: "no token database at \(path)")
        }
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        // Old secrets are overwritten, not only unlinked; the WAL is truncated afterwards.
        try queue.inDatabase { try $0.execute(sql: "PRAGMA secure_delete = ON") }
        defer { _ = try? queue.writeWithoutTransaction { try $0.checkpoint(.truncate) } }
        let migrator = Self.migrator
        return try queue.write { db in
            let missing = Set(migrator.migrations).subtracting(try migrator.appliedIdentifiers(db))
            guard missing.isEmpty else {
                throw RewrapError(
                    description: "\(path) lacks migrations \(missing.sorted().joined(separator: ", ")): start this version's token service on it once, stop it, then rotate; nothing was changed")
            }
            var report = RewrapReport()
            for row in try Row.fetchAll(db, sql: "SELECT kid, private_key, encrypted FROM signingKey") {
                let kid: String = row["kid"]
                guard let plain = open(row["private_key"], row["encrypted"]) else {
                    guard discardUnreadable else {
                        throw RewrapError(description: "signing key \(kid) does not open with the old key-encryption key; nothing was changed")
                    }
                    try db.execute(sql: "DELETE FROM signingKey WHERE kid = ?", arguments: [kid])
                    report.discardedKeys += 1
                    continue
                }
                try db.execute(sql: "UPDATE signingKey SET private_key = ?, encrypted = 1 WHERE kid = ?", arguments: [try seal(plain), kid])
                report.keys += 1
            }
            if let secret = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = ?", arguments: [TokenSecrets.successorName]) {
                if let plain = open(secret, secret.count != TokenSecrets.plainLength) {
                    try db.execute(sql: "UPDATE meta SET value = ? WHERE name = ?", arguments: [try seal(plain), TokenSecrets.successorName])
                } else if discardUnreadable {
                    try db.execute(sql: "DELETE FROM meta WHERE name = ?", arguments: [TokenSecrets.successorName])
                    report.discardedSecret = true
                } else {
                    throw RewrapError(description: "the refresh secret does not open with the old key-encryption key; nothing was changed")
                }
            }
            // Every signing key gone: the next start makes a new one, which becomes the signing key.
            return report
        }
    }

    /// Why `rewrap` changed nothing.
    public struct RewrapError: Error, CustomStringConvertible {
        /// One line for the operator.
        public let description: String
    }
}

extension SQLiteTokenStore {
    /// Re-seals the secrets of the token database at `path` with `newKey`, opening them with
    /// `oldKey` (nil: they may be plain text; with `discardUnreadable`, those that do not open are
    /// deleted). What `gatehouse keys rotate-encryption-key` runs, with the service stopped.
    public static func rewrap(
        path: String, oldKey: SymmetricKey?, newKey: SymmetricKey, discardUnreadable: Bool
    ) throws -> RewrapReport {
        try rewrap(
            path: path, discardUnreadable: discardUnreadable,
            open: { sealed, isSealed in
                guard isSealed else { return sealed }
                guard let oldKey else { return nil }
                return SecretSealing.open(sealed, with: oldKey)
            },
            seal: { try SecretSealing.seal($0, with: newKey) })
    }
}
