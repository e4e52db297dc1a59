import Foundation
import GatehouseSupport
import IdentityCore
import IdentityService
import Logging
import PostgresNIO
import PostgresSupport

// Provider identities and Sign in with Apple's tokens (issue 24, ported from
// `SQLiteUserStore+Providers` and `+AppleTokens`). A user created with its first identity, an
// identity linked or unlinked: one transaction with the user's row (its `providers` column and
// version). SQLite runs one writer at a time; here several instances write at once, so:
// - `link` and `unlink` lock the user's row first (`FOR UPDATE`), so two of them on one user
//   run one after the other and each sees what the other left (one identity per provider, never
//   a user left without a way to sign in, `providers` as the identities are);
// - two instances inserting or linking the same identity: the primary key of `identities` lets
//   one commit, the other waits for it and gets `credentialAlreadyInUse` (its user not written);
// - `storeAppleToken` locks the identity row it checks, so an unlink or a deletion racing it
//   runs after it and queues the token it stored.
extension PostgresUserStore {
    /// Migration 0011: `apple_tokens` and `apple_revocations`, and the triggers that move a
    /// user's tokens to the revocation queue when the user is deleted or its Apple identity
    /// unlinked (in the deleting statement's transaction), and drop a queued revocation when the
    /// Apple account is linked again.
    static let appleTokensMigration: [String] = [
        """
        CREATE TABLE apple_tokens (
            user_id TEXT NOT NULL,
            subject TEXT NOT NULL CHECK (char_length(subject) BETWEEN 1 AND 255),
            client_id TEXT NOT NULL CHECK (char_length(client_id) BETWEEN 1 AND 255),
            sealed_token BYTEA NOT NULL CHECK (octet_length(sealed_token) <= 4096),
            created_at BIGINT NOT NULL,
            PRIMARY KEY (user_id, subject)
        )
        """,
        """
        CREATE TABLE apple_revocations (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            client_id TEXT NOT NULL,
            sealed_token BYTEA NOT NULL,
            associated_data TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at BIGINT NOT NULL,
            created_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX apple_revocations_due ON apple_revocations(next_attempt_at)",
        // The wall clock in milliseconds, truncated (as SQLite's `changeLogNowSQL`): due at once.
        """
        CREATE FUNCTION apple_tokens_queue(for_user TEXT, for_subject TEXT) RETURNS void LANGUAGE plpgsql AS $$
        DECLARE
            now_ms BIGINT := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
        BEGIN
            WITH moved AS (
                DELETE FROM apple_tokens WHERE user_id = for_user AND (for_subject IS NULL OR subject = for_subject)
                RETURNING client_id, sealed_token, user_id, subject
            )
            INSERT INTO apple_revocations (client_id, sealed_token, associated_data, next_attempt_at, created_at)
                SELECT client_id, sealed_token, user_id || ' ' || subject, now_ms, now_ms FROM moved ORDER BY subject COLLATE "C";
        END
        $$
        """,
        """
        CREATE FUNCTION apple_tokens_user_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM apple_tokens_queue(OLD.id, NULL);
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER apple_tokens_user_deleted AFTER DELETE ON users
            FOR EACH ROW EXECUTE FUNCTION apple_tokens_user_deleted()
        """,
        """
        CREATE FUNCTION apple_tokens_identity_unlinked() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM apple_tokens_queue(OLD.user_id, OLD.subject);
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER apple_tokens_identity_unlinked AFTER DELETE ON identities
            FOR EACH ROW WHEN (OLD.provider = 'apple.com') EXECUTE FUNCTION apple_tokens_identity_unlinked()
        """,
        """
        CREATE FUNCTION apple_revocations_identity_linked() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM apple_revocations WHERE substr(associated_data, strpos(associated_data, ' ') + 1) = NEW.subject;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER apple_revocations_identity_linked AFTER INSERT ON identities
            FOR EACH ROW WHEN (NEW.provider = 'apple.com') EXECUTE FUNCTION apple_revocations_identity_linked()
        """,
    ]

    // MARK: Identities

    /// Inserts `user` with its first identity (`provider`, `subject`): one transaction, the
    /// user's `providers` listing it. `emailExists` when its email is taken;
    /// `credentialAlreadyInUse` when the identity is linked already (a racing sign-in, on this
    /// instance or another: the user is not written).
    public func insert(_ user: UserRecord, identity provider: String, subject: String) async throws -> UserRecord {
        var user = user
        user.linkedProviders = [provider]
        let inserted = user
        try await transaction { connection in
            try await Self.insert(inserted, on: connection, logger: self.queryLogger)
            try await Self.insertIdentity(provider: provider, subject: subject, user: inserted.id, at: inserted.createdAt, on: connection, logger: self.queryLogger)
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
        try await transaction { connection in
            let logger = self.queryLogger
            // Links and unlinks of one user run one after the other (see the top of the file).
            let exists = try await connection.query("SELECT id FROM users WHERE id = \(id.rawValue) FOR UPDATE", logger: logger).collect()
            let owners = try await connection.query(
                "SELECT subject FROM identities WHERE provider = \(provider) AND (subject = \(subject) OR user_id = \(id.rawValue))",
                logger: logger
            ).collect().map { try $0.decode(String.self) }
            if !owners.isEmpty {
                throw owners.contains(subject) ? IdentityError.credentialAlreadyInUse : IdentityError.providerAlreadyLinked
            }
            guard !exists.isEmpty else { throw IdentityError.userNotFound }
            try await Self.insertIdentity(provider: provider, subject: subject, user: id, at: now, on: connection, logger: logger)
            let providers = try await Self.linkedProviders(of: id, on: connection, logger: logger)
            return try await PostgresAdminPart.updateUser(id: id, now: now, on: connection, logger: logger) { user in
                try change(&user)
                user.linkedProviders = providers
            }
        }
    }

    /// Removes the user's identities of `provider`, in one transaction with its row.
    /// `providerNotLinked` when it has none; `lastSignInMethod` when the user would be left with
    /// no way to sign in (no password and no other provider): nothing written.
    public func unlink(provider: String, from id: UserID, now: Date) async throws -> UserRecord {
        try await transaction { connection in
            let logger = self.queryLogger
            let exists = try await connection.query("SELECT id FROM users WHERE id = \(id.rawValue) FOR UPDATE", logger: logger).collect()
            guard !exists.isEmpty else { throw IdentityError.userNotFound }
            let removed = try await connection.query(
                "DELETE FROM identities WHERE provider = \(provider) AND user_id = \(id.rawValue) RETURNING subject", logger: logger
            ).collect()
            guard !removed.isEmpty else { throw IdentityError.providerNotLinked }
            let providers = try await Self.linkedProviders(of: id, on: connection, logger: logger)
            return try await PostgresAdminPart.updateUser(id: id, now: now, on: connection, logger: logger) { user in
                guard user.passwordHash != nil || !providers.isEmpty else { throw IdentityError.lastSignInMethod }
                user.linkedProviders = providers
            }
        }
    }

    /// The subjects of the user's identities of `provider` (most often one), oldest first.
    public func subjects(provider: String, of id: UserID) async throws -> [String] {
        try await run { connection in
            try await connection.query(
                """
                SELECT subject FROM identities WHERE provider = \(provider) AND user_id = \(id.rawValue)
                ORDER BY created_at, subject COLLATE "C"
                """, logger: self.queryLogger
            ).collect().map { try $0.decode(String.self) }
        }
    }

    /// Inserts an identity; `credentialAlreadyInUse` when (`provider`, `subject`) is linked (also
    /// by a transaction of another instance that committed while this one waited for it).
    private static func insertIdentity(
        provider: String, subject: String, user: UserID, at: Date, on connection: PostgresConnection, logger: Logger
    ) async throws {
        do {
            try await connection.query(
                """
                INSERT INTO identities (provider, subject, user_id, created_at)
                VALUES (\(provider), \(subject), \(user.rawValue), \(at.millisecondsSince1970))
                """, logger: logger)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" && error.serverInfo?[.constraintName] == "identities_pkey" {
            throw IdentityError.credentialAlreadyInUse
        }
    }

    /// The providers of the user's identities, each once, in byte order (as SQLite sorts them).
    private static func linkedProviders(of id: UserID, on connection: PostgresConnection, logger: Logger) async throws -> [String] {
        try await connection.query(
            #"SELECT DISTINCT provider COLLATE "C" AS p FROM identities WHERE user_id = \#(id.rawValue) ORDER BY p"#, logger: logger
        ).collect().map { try $0.decode(String.self) }
    }

    // MARK: Apple tokens

    /// Keeps the sealed refresh token of the user's Apple identity `subject` while that identity
    /// is linked to the user, replacing (not revoking) an older one and dropping a revocation
    /// still queued for the Apple account, whichever user it was queued for. False (nothing
    /// stored) when the identity is not the user's. The identity's row is locked while the token
    /// is stored, so an unlink or deletion racing this call queues the stored token.
    public func storeAppleToken(user: UserID, subject: String, clientID: String, sealed: Data, at: Date) async throws -> Bool {
        try await transaction { connection in
            let logger = self.queryLogger
            let linked = try await connection.query(
                """
                SELECT 1 FROM identities WHERE provider = 'apple.com' AND subject = \(subject) AND user_id = \(user.rawValue)
                FOR SHARE
                """, logger: logger
            ).collect()
            guard !linked.isEmpty else { return false }
            let now = at.millisecondsSince1970
            // A newer token replaces the kept one, which is not revoked: revoking any token of an
            // Apple account ends the app's whole authorisation, the new token's too. For the same
            // reason a revocation still queued for this Apple account is dropped.
            try await connection.query(
                "DELETE FROM apple_revocations WHERE substr(associated_data, strpos(associated_data, ' ') + 1) = \(subject)",
                logger: logger)
            try await connection.query(
                """
                INSERT INTO apple_tokens (user_id, subject, client_id, sealed_token, created_at)
                VALUES (\(user.rawValue), \(subject), \(clientID), \(sealed), \(now))
                ON CONFLICT (user_id, subject) DO UPDATE SET
                    client_id = EXCLUDED.client_id, sealed_token = EXCLUDED.sealed_token, created_at = EXCLUDED.created_at
                """, logger: logger)
            return true
        }
    }

    /// How many Apple tokens are kept (for tests and figures).
    public func appleTokenCount() async throws -> Int {
        try await countRows("SELECT count(*) FROM apple_tokens")
    }

    /// The revocations due at `now`, oldest first, at most `limit`.
    public func dueAppleRevocations(now: Date, limit: Int) async throws -> [PendingAppleRevocation] {
        try await run { connection in
            try await connection.query(
                """
                SELECT id, client_id, sealed_token, associated_data, attempts FROM apple_revocations
                WHERE next_attempt_at <= \(now.millisecondsSince1970) ORDER BY next_attempt_at, id LIMIT \(Int64(max(0, limit)))
                """, logger: self.queryLogger
            ).collect().map { row in
                let (id, clientID, sealed, associated, attempts) = try row.decode((Int64, String, Data, String, Int32).self)
                return PendingAppleRevocation(id: id, clientID: clientID, sealedToken: sealed, associatedData: associated, attempts: Int(attempts))
            }
        }
    }

    /// Claims a due revocation right before it is sent: false when it is gone (the Apple account
    /// was linked again meanwhile) or no longer due. The claim pushes its next attempt to `until`,
    /// so a worker that dies mid-call retries it then. Two instances claiming one row at once:
    /// the second waits for the first's row lock, then finds the row no longer due (`until` after
    /// `now`), so exactly one sends it.
    public func claimAppleRevocation(id: Int64, now: Date, until: Date) async throws -> Bool {
        try await transaction { connection in
            try await connection.query(
                """
                UPDATE apple_revocations SET next_attempt_at = \(until.millisecondsSince1970)
                WHERE id = \(id) AND next_attempt_at <= \(now.millisecondsSince1970) RETURNING id
                """, logger: self.queryLogger
            ).collect().count == 1
        }
    }

    /// Removes a revocation that is done (or can never succeed). PostgreSQL keeps the deleted
    /// row's bytes until VACUUM reclaims them (SQLite overwrites them: `secure_delete`).
    public func finishAppleRevocation(id: Int64) async throws {
        try await transaction { connection in
            try await connection.query("DELETE FROM apple_revocations WHERE id = \(id)", logger: self.queryLogger)
        }
    }

    /// Schedules another attempt of a revocation that failed.
    public func retryAppleRevocation(id: Int64, at next: Date) async throws {
        try await transaction { connection in
            try await connection.query(
                "UPDATE apple_revocations SET attempts = attempts + 1, next_attempt_at = \(next.millisecondsSince1970) WHERE id = \(id)",
                logger: self.queryLogger)
        }
    }

    /// Revocations waiting (for tests, figures and `/readyz`-style checks).
    public func pendingAppleRevocationCount() async throws -> Int {
        try await countRows("SELECT count(*) FROM apple_revocations")
    }

    private func countRows(_ query: PostgresQuery) async throws -> Int {
        try await run { connection in
            Int(try await connection.query(query, logger: self.queryLogger).collect().first?.decode(Int64.self) ?? 0)
        }
    }
}
