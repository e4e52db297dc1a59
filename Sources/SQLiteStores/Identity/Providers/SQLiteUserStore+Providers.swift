import Foundation
import Mail
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
import GRDB
import IdentityCore

// Provider identities (issue 20): a user created with its first identity, an identity linked
// to an existing user, and one unlinked, each in one transaction with the user's row (its
// `providers` column, its version: the change log and the realtime stream see the change).

extension SQLiteUserStore {
    /// Migration 0013: a user may have no email when it has a linked provider (an OpenID Connect
    /// provider may send none). SQLite cannot change a CHECK in place, so `users` is rebuilt:
    /// copied into a table with the new CHECK, the old one dropped (foreign keys are off during
    /// a migration, so nothing cascades), the new one renamed, and its indexes and triggers
    /// (read from the schema before the drop) created again.
    static func registerProviderUsersMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("0013-provider-users", foreignKeyChecks: .deferred) { db in
            let dependents = try String.fetchAll(db, sql: """
                SELECT sql FROM sqlite_master
                WHERE tbl_name = 'users' AND type IN ('index', 'trigger') AND sql IS NOT NULL
                ORDER BY type = 'trigger', name
                """)
            // The table as it stands (SQLite keeps added columns in its CREATE text), with the one
            // CHECK relaxed; same columns in the same order, so the rows copy as they are.
            let strict = "CHECK (isAnonymous = 1 OR emailNormalized IS NOT NULL)"
            let relaxed = "CHECK (isAnonymous = 1 OR emailNormalized IS NOT NULL OR providers != '')"
            guard let create = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'users'"),
                create.contains(strict), create.hasPrefix("CREATE TABLE users (")
            else { throw IdentityError.storage(cause: "migration 0013: the users table is not as migration 0012 left it") }
            let rebuilt = "CREATE TABLE users_rebuilt (" + create.dropFirst("CREATE TABLE users (".count)
            try db.execute(sql: rebuilt.replacingOccurrences(of: strict, with: relaxed))
            try db.execute(sql: """
                INSERT INTO users_rebuilt SELECT * FROM users;
                DROP TABLE users;
                ALTER TABLE users_rebuilt RENAME TO users;
                """)
            for sql in dependents { try db.execute(sql: sql) }
        }
    }

    /// Inserts `user` with its first identity (`provider`, `subject`): one transaction, the
    /// user's `providers` listing it. `emailExists` when its email is taken;
    /// `credentialAlreadyInUse` when the identity is linked already (a racing sign-in).
    public func insert(_ user: UserRecord, identity provider: String, subject: String) async throws -> UserRecord {
        var user = user
        user.linkedProviders = [provider]
        let inserted = user
        try await run { db in
            try db.cachedStatement(sql: Self.insertSQL).execute(arguments: Self.arguments(inserted))
            try Self.insertIdentity(provider: provider, subject: subject, user: inserted.id, at: inserted.createdAt, in: db)
        }
        return inserted
    }

    /// Links (`provider`, `subject`) to the user `id` and applies `change` to it, in one
    /// transaction (the version moves, `providers` lists the provider). `credentialAlreadyInUse`
    /// when the identity is linked to anyone, `providerAlreadyLinked` when the user has an
    /// identity of this provider, `userNotFound`, or whatever `change` throws: nothing written.
    public func link(
        provider: String, subject: String, to id: UserID, now: Date, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await run { db in
            let owners = try String.fetchAll(
                db, sql: "SELECT user_id FROM identities WHERE provider = ? AND (subject = ? OR user_id = ?)",
                arguments: [provider, subject, id.rawValue])
            if !owners.isEmpty {
                let owner = try String.fetchOne(
                    db, sql: "SELECT user_id FROM identities WHERE provider = ? AND subject = ?", arguments: [provider, subject])
                throw owner == nil ? IdentityError.providerAlreadyLinked : IdentityError.credentialAlreadyInUse
            }
            try Self.insertIdentity(provider: provider, subject: subject, user: id, at: now, in: db)
            let providers = try Self.linkedProviders(of: id, in: db)
            return try Self.update(id: id, expectedVersion: nil, now: now, in: db) { user in
                try change(&user)
                user.linkedProviders = providers
            }
        }
    }

    /// Removes the user's identities of `provider`, in one transaction with its row.
    /// `providerNotLinked` when it has none; `lastSignInMethod` when the user would be left with
    /// no way to sign in (no password and no other provider).
    public func unlink(provider: String, from id: UserID, now: Date) async throws -> UserRecord {
        try await run { db in
            let removed = try db.cachedStatement(sql: "DELETE FROM identities WHERE provider = ? AND user_id = ?")
            try removed.execute(arguments: [provider, id.rawValue])
            guard db.changesCount > 0 else {
                throw try Self.userExists(id, in: db) ? IdentityError.providerNotLinked : IdentityError.userNotFound
            }
            let providers = try Self.linkedProviders(of: id, in: db)
            return try Self.update(id: id, expectedVersion: nil, now: now, in: db) { user in
                guard user.passwordHash != nil || !providers.isEmpty else { throw IdentityError.lastSignInMethod }
                user.linkedProviders = providers
            }
        }
    }

    /// The subjects of the user's identities of `provider` (most often one).
    public func subjects(provider: String, of id: UserID) async throws -> [String] {
        try await read { db in
            try String.fetchAll(
                db, sql: "SELECT subject FROM identities WHERE provider = ? AND user_id = ?", arguments: [provider, id.rawValue])
        }
    }

    private static func insertIdentity(provider: String, subject: String, user: UserID, at: Date, in db: Database) throws {
        let statement = try db.cachedStatement(sql: "INSERT INTO identities (provider, subject, user_id, created_at) VALUES (?, ?, ?, ?)")
        do {
            try statement.execute(arguments: [provider, subject, user.rawValue, at.millisecondsSince1970])
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_PRIMARYKEY {
            throw IdentityError.credentialAlreadyInUse
        }
    }

    private static func linkedProviders(of id: UserID, in db: Database) throws -> [String] {
        try String.fetchAll(db, sql: "SELECT DISTINCT provider FROM identities WHERE user_id = ? ORDER BY provider", arguments: [id.rawValue])
    }

    private static func userExists(_ id: UserID, in db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM users WHERE id = ?)", arguments: [id.rawValue]) ?? false
    }
}
