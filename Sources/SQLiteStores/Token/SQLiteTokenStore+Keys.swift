import Foundation
import GatehouseContracts
import GRDB
import TokenPorts

extension SQLiteTokenStore {
    // MARK: Meta and keys

    /// A stored secret, created with `make` on first use.
    public func secret(named name: String, make: @escaping @Sendable () -> Data) async throws -> Data {
        try await write { db in
            if let existing = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE name = ?", arguments: [name]) {
                return existing
            }
            let value = make()
            try db.execute(sql: "INSERT INTO meta (name, value) VALUES (?, ?)", arguments: [name, value])
            return value
        }
    }

    /// Every stored key, oldest first.
    public func keys() async throws -> [StoredSigningKey] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM signingKey ORDER BY created_at").map { row in
                StoredSigningKey(
                    kid: row["kid"], algorithm: row["algorithm"], privateKey: row["private_key"], encrypted: row["encrypted"],
                    createdAt: Self.date(row["created_at"])!, activatesAt: Self.date(row["activates_at"]),
                    signingUntil: Self.date(row["signing_until"]), retireAfter: Self.date(row["retire_after"]))
            }
        }
    }

    /// Adds `key`, to sign from `key.activatesAt`; the key signing until then stops at that
    /// instant and stays published until `previousRetireAfter`. `audit` is appended in the same
    /// transaction. With `ifNewestBefore`, only when the newest key was made before that time
    /// (a scheduled rotation: decided in the transaction, so one rotation per due time); whether
    /// it added the key.
    @discardableResult
    public func insertKey(_ key: StoredSigningKey, previousRetireAfter: Date, audit: AuditEvent?, ifNewestBefore cutoff: Date?) async throws -> Bool {
        try await write { db in
            if let cutoff, let newest = try Int64.fetchOne(db, sql: "SELECT max(created_at) FROM signingKey"), newest >= Self.ms(cutoff) {
                return false
            }
            try db.execute(
                sql: "UPDATE signingKey SET signing_until = ?, retire_after = ? WHERE signing_until IS NULL",
                arguments: [Self.ms(key.activatesAt), Self.ms(previousRetireAfter)])
            try Self.insert(key, in: db)
            if let audit { try Self.appendAudit(audit, in: db) }
            return true
        }
    }

    /// Adds `key` unless a key exists; whether it did.
    public func insertFirstKey(_ key: StoredSigningKey) async throws -> Bool {
        try await write { db in
            guard try Int.fetchOne(db, sql: "SELECT count(*) FROM signingKey") == 0 else { return false }
            try Self.insert(key, in: db)
            return true
        }
    }

    private static func insert(_ key: StoredSigningKey, in db: Database) throws {
        try db.execute(
            sql: "INSERT INTO signingKey (kid, algorithm, private_key, encrypted, created_at, activates_at) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [key.kid, key.algorithm, key.privateKey, key.encrypted, Self.ms(key.createdAt), Self.ms(key.activatesAt)])
    }
}
