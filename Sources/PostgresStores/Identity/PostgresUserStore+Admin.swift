import Foundation
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import IdentityPorts
import Logging
import PostgresNIO
import PostgresSupport

// The admin API's part of the store (issue 24, ported from `SQLiteUserStore+AdminKeys`,
// `+AdminUsers` and `+Import`): admin keys, the filtered listing of users, bulk import and
// export. Provider identities and Apple tokens are in `PostgresUserStore+Providers.swift`.
//
// Order: SQLite compares text byte by byte (BINARY); PostgreSQL by the database's collation,
// which may be a language's. Every comparison and ORDER BY on ids and addresses here says
// `COLLATE "C"` (byte order, as SQLite), and migration 0010 indexes `users` in that order, so
// listing and export page the same way on both stores, whatever the database's locale.
extension PostgresUserStore {
    /// The migrations of this part: 0010 `admin_keys` (and the byte-order indexes of `users`
    /// that listing and export page by), 0011 `apple_tokens` and `apple_revocations` with the
    /// triggers that queue a user's Apple tokens for revocation.
    static let adminMigrations: [PostgresMigrator.Migration] = [
        .init("0010-admin-keys", [
            """
            CREATE TABLE admin_keys (
                id TEXT NOT NULL PRIMARY KEY CHECK (char_length(id) = 16),
                name TEXT NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 64),
                scopes TEXT NOT NULL CHECK (char_length(scopes) BETWEEN 1 AND 256),
                secret_hash BYTEA NOT NULL CHECK (octet_length(secret_hash) = 32),
                created_at BIGINT NOT NULL,
                revoked_at BIGINT,
                last_used_at BIGINT
            )
            """,
            #"CREATE INDEX users_id_bytes ON users ((id COLLATE "C"))"#,
            #"CREATE INDEX users_email_normalized_bytes ON users ((email_normalized COLLATE "C"))"#,
        ]),
        .init("0011-apple-tokens", appleTokensMigration),
    ]

    // MARK: Admin keys

    /// Stores a new key (with the running call's audit event).
    public func insertAdminKey(_ key: AdminKey, secretHash: Data) async throws {
        _ = try await transaction { connection in
            try await connection.query(
                """
                INSERT INTO admin_keys (id, name, scopes, secret_hash, created_at)
                VALUES (\(key.id), \(key.name), \(key.scopes.joined(separator: ",")), \(secretHash), \(key.createdAt.millisecondsSince1970))
                """, logger: self.queryLogger)
        }
    }

    /// Every key, oldest first.
    public func adminKeys() async throws -> [AdminKey] {
        try await run { connection in
            try await connection.query(
                #"SELECT \#(unescaped: Self.adminKeyColumns) FROM admin_keys ORDER BY created_at, id COLLATE "C""#, logger: self.queryLogger
            ).collect().map(Self.adminKey)
        }
    }

    /// Revokes the key `id` (a second time keeps the first time); the key, or `adminKeyNotFound`.
    /// Its `admin_key.revoked` audit event (actor: the operator) is written in the same
    /// transaction.
    public func revokeAdminKey(id: String, at now: Date) async throws -> AdminKey {
        let detail = #"{"keyId":"\#(id.filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }.prefix(16))"}"#
        let event = AuditEvent(occurredAt: now, kind: AuditEvent.Kind.adminKeyRevoked, actor: AuditEvent.Actor.operator, detailJSON: detail)
        return try await AuditScope.$current.withValue(AuditRecorder(event)) {
            try await transaction { connection in
                let rows = try await connection.query(
                    """
                    UPDATE admin_keys SET revoked_at = coalesce(revoked_at, \(now.millisecondsSince1970)) WHERE id = \(id)
                    RETURNING \(unescaped: Self.adminKeyColumns)
                    """, logger: self.queryLogger
                ).collect()
                guard let row = rows.first else { throw IdentityError.adminKeyNotFound }
                return try Self.adminKey(row)
            }
        }
    }

    /// The active key `id` and the SHA-256 of its secret; nil when unknown or revoked. (The
    /// caller compares the hash in constant time.)
    public func activeAdminKey(id: String) async throws -> (AdminKey, Data)? {
        try await run { connection in
            let rows = try await connection.query(
                "SELECT \(unescaped: Self.adminKeyColumns), secret_hash FROM admin_keys WHERE id = \(id) AND revoked_at IS NULL",
                logger: self.queryLogger
            ).collect()
            guard let row = rows.first else { return nil }
            let (keyID, name, scopes, created, revoked, used, hash) = try row.decode((String, String, String, Int64, Int64?, Int64?, Data).self)
            return (Self.adminKey(keyID, name, scopes, created, revoked, used), hash)
        }
    }

    /// Notes that key `id` was used at `now` (the caller writes at most once a minute per key).
    public func touchAdminKey(id: String, at now: Date) async throws {
        _ = try await transaction { connection in
            try await connection.query(
                "UPDATE admin_keys SET last_used_at = \(now.millisecondsSince1970) WHERE id = \(id)", logger: self.queryLogger)
        }
    }

    private static let adminKeyColumns = "id, name, scopes, created_at, revoked_at, last_used_at"

    private static func adminKey(_ row: PostgresRow) throws -> AdminKey {
        let (id, name, scopes, created, revoked, used) = try row.decode((String, String, String, Int64, Int64?, Int64?).self)
        return adminKey(id, name, scopes, created, revoked, used)
    }

    private static func adminKey(_ id: String, _ name: String, _ scopes: String, _ created: Int64, _ revoked: Int64?, _ used: Int64?) -> AdminKey {
        AdminKey(
            id: id, name: name, scopes: scopes.split(separator: ",").map(String.init), createdAt: Date(millisecondsSince1970: created),
            revokedAt: revoked.map(Date.init(millisecondsSince1970:)), lastUsedAt: used.map(Date.init(millisecondsSince1970:)))
    }

    // MARK: Listing

    /// Up to `limit` users with an id after `afterID` ("" from the first) that pass `filter`, in
    /// id order (bytes, as SQLite), and whether more follow.
    public func users(filter: UserFilter, after afterID: String, limit: Int) async throws -> ([UserRecord], Bool) {
        // Only constant SQL is written into the text; every value is a bind.
        var sql = PostgresQuery.StringInterpolation(literalCapacity: 512, interpolationCount: 8)
        sql.appendLiteral("SELECT \(Self.columns) FROM users WHERE id COLLATE \"C\" > ")
        sql.appendInterpolation(afterID)
        if !filter.emailPrefix.isEmpty {
            // A range of the byte-order index: every address that starts with the prefix sorts in it.
            sql.appendLiteral(" AND email_normalized COLLATE \"C\" >= ")
            sql.appendInterpolation(filter.emailPrefix)
            sql.appendLiteral(" AND email_normalized COLLATE \"C\" < ")
            sql.appendInterpolation(filter.emailPrefix + "\u{10FFFF}")
        }
        if filter.provider == "password" {
            sql.appendLiteral(" AND password_hash IS NOT NULL")
        } else if !filter.provider.isEmpty {
            sql.appendLiteral(" AND strpos(',' || providers || ',', ',' || ")
            sql.appendInterpolation(filter.provider)
            sql.appendLiteral("::text || ',') > 0")
        }
        if let disabled = filter.disabled {
            sql.appendLiteral(" AND disabled = ")
            sql.appendInterpolation(disabled)
        }
        if let anonymous = filter.anonymous {
            sql.appendLiteral(" AND is_anonymous = ")
            sql.appendInterpolation(anonymous)
        }
        if let after = filter.createdAfter {
            sql.appendLiteral(" AND created_at >= ")
            sql.appendInterpolation(after.millisecondsSince1970)
        }
        if let before = filter.createdBefore {
            sql.appendLiteral(" AND created_at < ")
            sql.appendInterpolation(before.millisecondsSince1970)
        }
        sql.appendLiteral(" ORDER BY id COLLATE \"C\" LIMIT ")
        sql.appendInterpolation(Int64(max(0, limit)) + 1)
        let query = PostgresQuery(stringInterpolation: sql)
        let rows = try await run { connection in
            try await connection.query(query, logger: self.queryLogger).collect().map(Self.record)
        }
        return (Array(rows.prefix(limit)), rows.count > limit)
    }

    // MARK: Import and export

    /// Writes `candidates` in one transaction, each in its own savepoint (a refused item is
    /// rolled back to it and the others stay written); `update` overwrites a matched user (by id
    /// when the item named one, else by normalized email), otherwise a match is skipped. One
    /// result per candidate, in order. `auditDetail` turns the results into the detail of the
    /// running call's audit event, which commits with the batch. An outage or a storage error
    /// ends the whole batch (nothing written), as on SQLite.
    public func importUsers(
        _ candidates: [ImportCandidate], update: Bool, now: Date, auditDetail: (@Sendable ([ImportWrite]) -> String)?
    ) async throws -> [ImportWrite] {
        let audit = AuditScope.current
        return try await transaction { connection in
            if update {
                // Every user the batch may overwrite, locked first and in id order: the first
                // update then holds the change log's counter while no other row is still to be
                // locked, so the batch never waits on a writer that waits on the counter.
                let ids = candidates.filter(\.idGiven).map(\.record.id.rawValue)
                let emails = candidates.compactMap(\.record.emailNormalized)
                _ = try await connection.query(
                    """
                    SELECT id FROM users WHERE id = ANY(\(ids)) OR email_normalized = ANY(\(emails))
                    ORDER BY id COLLATE "C" FOR UPDATE
                    """, logger: self.queryLogger
                ).collect()
            }
            var results: [ImportWrite] = []
            results.reserveCapacity(candidates.count)
            for candidate in candidates {
                try await connection.query("SAVEPOINT import_item", logger: self.queryLogger)
                do {
                    let written = try await Self.importOne(candidate, update: update, now: now, on: connection, logger: self.queryLogger)
                    try await connection.query("RELEASE SAVEPOINT import_item", logger: self.queryLogger)
                    results.append(written)
                } catch {
                    let translated = Self.translate(error)
                    guard let refusal = translated as? IdentityError, !ImportRules.endsBatch(refusal) else {
                        throw error  // the whole batch: `run` translates it (and tries a broken deadlock again)
                    }
                    try await connection.query("ROLLBACK TO SAVEPOINT import_item", logger: self.queryLogger)
                    try await connection.query("RELEASE SAVEPOINT import_item", logger: self.queryLogger)
                    results.append(.failed(refusal))
                }
            }
            if let audit, let auditDetail {
                let detail = auditDetail(results)
                audit.update { $0.detailJSON = detail }
            }
            return results
        }
    }

    private static func importOne(
        _ candidate: ImportCandidate, update: Bool, now: Date, on connection: PostgresConnection, logger: Logger
    ) async throws -> ImportWrite {
        var match: String?
        if candidate.idGiven {
            match = try await connection.query("SELECT id FROM users WHERE id = \(candidate.record.id.rawValue)", logger: logger)
                .collect().first?.decode(String.self)
        }
        if match == nil, let email = candidate.record.emailNormalized {
            match = try await connection.query("SELECT id FROM users WHERE email_normalized = \(email)", logger: logger)
                .collect().first?.decode(String.self)
        }
        switch ImportRules.step(matched: match.map { UserID($0) }, update: update) {
        case .insert:
            try await insert(candidate.record, on: connection, logger: logger)
            try await linkIdentities(candidate.identities, to: candidate.record.id, now: now, on: connection, logger: logger)
            return .created(candidate.record.id)
        case .skip(let id):
            return .skipped(id)
        case .update(let id):
            _ = try await PostgresAdminPart.updateUser(id: id, now: now, on: connection, logger: logger, candidate.apply)
            try await linkIdentities(candidate.identities, to: id, now: now, on: connection, logger: logger)
            return .updated(id)
        }
    }

    /// Links an imported user's identities, each as `ImportRules.linksIdentity` decides.
    private static func linkIdentities(
        _ identities: [LinkedIdentity], to user: UserID, now: Date, on connection: PostgresConnection, logger: Logger
    ) async throws {
        for identity in identities {
            let holder = try await connection.query(
                "SELECT user_id FROM identities WHERE provider = \(identity.provider) AND subject = \(identity.subject)", logger: logger
            ).collect().first.map { UserID(try $0.decode(String.self)) }
            let subjects = try await connection.query(
                "SELECT subject FROM identities WHERE provider = \(identity.provider) AND user_id = \(user.rawValue)", logger: logger
            ).collect().map { try $0.decode(String.self) }
            guard try ImportRules.linksIdentity(subject: identity.subject, of: user, holder: holder, subjectsOfProvider: subjects) else { continue }
            try await connection.query(
                """
                INSERT INTO identities (provider, subject, user_id, created_at)
                VALUES (\(identity.provider), \(identity.subject), \(user.rawValue), \(now.millisecondsSince1970))
                """, logger: logger)
        }
    }

    /// The identities of `users`, each user's sorted by provider and subject.
    public func identities(of users: [UserID]) async throws -> [UserID: [LinkedIdentity]] {
        guard !users.isEmpty else { return [:] }
        return try await run { connection in
            var result: [UserID: [LinkedIdentity]] = [:]
            let rows = try await connection.query(
                """
                SELECT user_id, provider, subject FROM identities WHERE user_id = ANY(\(users.map(\.rawValue)))
                ORDER BY user_id, provider, subject
                """, logger: self.queryLogger
            ).collect()
            for row in rows {
                let (user, provider, subject) = try row.decode((String, String, String).self)
                result[UserID(user), default: []].append(LinkedIdentity(provider: provider, subject: subject))
            }
            return result
        }
    }

    /// Up to `limit` users with an id after `afterID` ("" from the first), in id order (bytes).
    public func users(after afterID: String, limit: Int) async throws -> [UserRecord] {
        try await run { connection in
            try await connection.query(
                """
                SELECT \(unescaped: Self.columns) FROM users WHERE id COLLATE "C" > \(afterID)
                ORDER BY id COLLATE "C" LIMIT \(Int64(max(0, limit)))
                """, logger: self.queryLogger
            ).collect().map(Self.record)
        }
    }
}

/// Statements this part's files share.
enum PostgresAdminPart {
    /// `PostgresUserStore.updateUser` (the one write of a changed user) without a version to expect.
    static func updateUser(
        id: UserID, now: Date, on connection: PostgresConnection, logger: Logger, _ change: (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await PostgresUserStore.updateUser(id: id, now: now, on: connection, logger: logger, change)
    }
}
