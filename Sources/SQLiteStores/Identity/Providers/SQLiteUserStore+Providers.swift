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

    /// The transaction seam (`UserTransactions`): the user's row and identities read, `decide`
    /// called, its `UserWrites` applied in the order they give, in one transaction of the one writer.
    public func transact<T: Sendable>(
        userID id: UserID, now: Date, _ decide: @escaping @Sendable (UserState) throws -> (UserWrites, T)
    ) async throws -> (UserRecord, T) {
        try await run { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: Self.selectByIDSQL), arguments: [id.rawValue]) else {
                throw IdentityError.userNotFound
            }
            let user = Self.record(row)
            let identities = try Row.fetchAll(
                db, sql: "SELECT provider, subject FROM identities WHERE user_id = ? ORDER BY provider, subject", arguments: [id.rawValue]
            ).map { LinkedIdentity(provider: $0[0], subject: $0[1]) }
            let (writes, value) = try decide(UserState(user: user, identities: identities))
            if let provider = writes.unlinkProvider {
                try db.execute(sql: "DELETE FROM identities WHERE provider = ? AND user_id = ?", arguments: [provider, id.rawValue])
            }
            if let identity = writes.linkIdentity {
                try Self.insertIdentity(provider: identity.provider, subject: identity.subject, user: id, at: now, in: db)
            }
            guard let written = writes.user else { return (user, value) }
            return (try Self.update(id: id, expectedVersion: user.version, now: now, in: db) { $0 = written }, value)
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
}
