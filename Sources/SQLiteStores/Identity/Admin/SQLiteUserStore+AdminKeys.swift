import Foundation
import Mail
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import GRDB
import IdentityCore

// Admin API keys (issue 22 §1): `admin_keys` holds each key's id, name, scopes and the SHA-256 of
// its secret, never the secret.
extension SQLiteUserStore {
    /// Migration 0012: `admin_keys`.
    static func registerAdminKeysMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0012-admin-keys") { db in
            try db.execute(sql: """
                CREATE TABLE admin_keys (
                    id TEXT NOT NULL PRIMARY KEY CHECK (length(id) = 16),
                    name TEXT NOT NULL CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 64),
                    scopes TEXT NOT NULL CHECK (length(scopes) BETWEEN 1 AND 256),
                    secretHash BLOB NOT NULL CHECK (length(secretHash) = 32),
                    createdAt INTEGER NOT NULL,
                    revokedAt INTEGER,
                    lastUsedAt INTEGER
                ) STRICT;
                """)
        }
    }

    /// Stores a new key.
    public func insertAdminKey(_ key: AdminKey, secretHash: Data) async throws {
        try await run { db in
            try db.execute(
                sql: "INSERT INTO admin_keys (id, name, scopes, secret_hash, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [key.id, key.name, key.scopes.joined(separator: ","), secretHash, key.createdAt.millisecondsSince1970])
        }
    }

    /// Every key, oldest first.
    public func adminKeys() async throws -> [AdminKey] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.adminKeyColumns) FROM admin_keys ORDER BY created_at, id").map(Self.adminKey)
        }
    }

    /// Revokes the key `id` (a second time keeps the first time); the key, or `adminKeyNotFound`.
    /// Its `admin_key.revoked` audit event (actor: the operator) is written in the same
    /// transaction. The running service (`identity.revokeAdminKey`) and `gatehouse admin keys
    /// revoke --data-dir` both come here.
    public func revokeAdminKey(id: String, at now: Date) async throws -> AdminKey {
        let detail = #"{"keyId":"\#(id.filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }.prefix(16))"}"#
        let event = AuditEvent(occurredAt: now, kind: AuditEvent.Kind.adminKeyRevoked, actor: AuditEvent.Actor.operator, detailJSON: detail)
        return try await AuditScope.$current.withValue(AuditRecorder(event)) { try await revokeAdminKeyRow(id: id, at: now) }
    }

    private func revokeAdminKeyRow(id: String, at now: Date) async throws -> AdminKey {
        try await run { db in
            try db.execute(
                sql: "UPDATE admin_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?", arguments: [now.millisecondsSince1970, id])
            guard let row = try Row.fetchOne(db, sql: "SELECT \(Self.adminKeyColumns) FROM admin_keys WHERE id = ?", arguments: [id])
            else { throw IdentityError.adminKeyNotFound }
            return Self.adminKey(row)
        }
    }

    /// The active key `id` and the SHA-256 of its secret; nil when unknown or revoked.
    public func activeAdminKey(id: String) async throws -> (AdminKey, Data)? {
        try await read { db in
            guard let row = try Row.fetchOne(
                db, sql: "SELECT \(Self.adminKeyColumns), secret_hash FROM admin_keys WHERE id = ? AND revoked_at IS NULL", arguments: [id])
            else { return nil }
            return (Self.adminKey(row), row[6] as Data)
        }
    }

    /// Notes that key `id` was used at `now` (the caller writes at most once a minute per key).
    public func touchAdminKey(id: String, at now: Date) async throws {
        try await run { db in
            try db.execute(sql: "UPDATE admin_keys SET last_used_at = ? WHERE id = ?", arguments: [now.millisecondsSince1970, id])
        }
    }

    private static let adminKeyColumns = "id, name, scopes, created_at, revoked_at, last_used_at"

    private static func adminKey(_ row: Row) -> AdminKey {
        AdminKey(
            id: row[0], name: row[1], scopes: (row[2] as String).split(separator: ",").map(String.init),
            createdAt: Date(millisecondsSince1970: row[3]), revokedAt: (row[4] as Int64?).map(Date.init(millisecondsSince1970:)),
            lastUsedAt: (row[5] as Int64?).map(Date.init(millisecondsSince1970:)))
    }
}
