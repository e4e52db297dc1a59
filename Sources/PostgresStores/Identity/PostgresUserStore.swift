import Foundation
import GatehouseSupport
import IdentityCore
import Logging
import PostgresNIO
import IdentityPorts
import PostgresSupport

/// The identity service's user store on PostgreSQL (issue 24): the `UserStore` contract of the
/// SQLite store, kept by the same invariants (CHECK constraints: email and its normalized form
/// together, a user without email is anonymous or has a provider, settings a JSON object of at
/// most 16 KiB, claims of at most 1,000 bytes, names of at most 256 characters), with the same
/// error codes. Times are milliseconds, as SQLite stores them. Every statement is parameterized.
///
/// The rest of the identity service's tables (`IdentityStorage`) are in the `+Mail`, `+Logs`,
/// `+Admin`, `+Providers` and `+Handles` extensions; several identity instances share one
/// database through it (`GATEHOUSE_IDENTITY_DATABASE_URL`).
public final class PostgresUserStore: UserStore {
    let client: PostgresClient
    let logger: Logger
    /// postgres-nio's own query logging stays off: at trace level it prints rows and binds
    /// (password hashes, code hashes); the store logs its failures itself.
    let queryLogger = Logger(label: "gatehouse.identity.postgres.query", factory: { _ in SwiftLogNoOpLogHandler() })
    /// Whether the database answers: calls fail at once while it does not.
    let health: DatabaseHealth

    /// A store over `client` (run by its owner, with at least two connections); call `migrate()`
    /// before use.
    public init(client: PostgresClient, logger: Logger = Logger(label: "gatehouse.identity.postgres")) {
        self.client = client
        self.logger = logger
        health = DatabaseHealth(client: client, name: "identity", logger: logger)
    }

    /// The numbered, forward-only migrations of the identity store.
    public static let migrator = PostgresMigrator(store: "identity", migrations: baseMigrations + mailMigrations + logMigrations + adminMigrations + handleMigrations)

    /// Migration 0001: users and their provider identities.
    static let baseMigrations: [PostgresMigrator.Migration] = [
        .init("0001-users-and-identities", [
            """
            CREATE TABLE users (
                id TEXT NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 22 AND 64),
                email TEXT CHECK (email IS NULL OR octet_length(email) BETWEEN 3 AND 254),
                email_normalized TEXT UNIQUE CHECK (email_normalized IS NULL OR octet_length(email_normalized) BETWEEN 3 AND 254),
                email_verified BOOLEAN NOT NULL DEFAULT false,
                display_name TEXT CHECK (display_name IS NULL OR char_length(display_name) <= 256),
                photo_url TEXT CHECK (photo_url IS NULL OR octet_length(photo_url) <= 2048),
                password_hash TEXT CHECK (password_hash IS NULL OR octet_length(password_hash) <= 1024),
                is_anonymous BOOLEAN NOT NULL DEFAULT false,
                disabled BOOLEAN NOT NULL DEFAULT false,
                custom_claims TEXT NOT NULL DEFAULT '' CHECK (
                    custom_claims = '' OR (octet_length(custom_claims) <= 1000 AND json_typeof(custom_claims::json) = 'object')),
                settings TEXT NOT NULL DEFAULT '{}' CHECK (octet_length(settings) <= 16384 AND json_typeof(settings::json) = 'object'),
                created_at BIGINT NOT NULL,
                updated_at BIGINT NOT NULL,
                last_sign_in_at BIGINT,
                tokens_valid_after BIGINT,
                version BIGINT NOT NULL DEFAULT 1 CHECK (version >= 1),
                providers TEXT NOT NULL DEFAULT '' CHECK (length(providers) <= 1024),
                CHECK ((email IS NULL) = (email_normalized IS NULL)),
                CHECK (is_anonymous OR email_normalized IS NOT NULL OR providers <> '')
            )
            """,
            """
            CREATE TABLE identities (
                provider TEXT NOT NULL CHECK (length(provider) BETWEEN 1 AND 64),
                subject TEXT NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
                user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                created_at BIGINT NOT NULL,
                PRIMARY KEY (provider, subject)
            )
            """,
            "CREATE INDEX identities_user_id ON identities(user_id)",
        ]),
    ]

    /// Applies the migrations not applied yet (once, whatever other instances do meanwhile).
    public func migrate() async throws {
        try await Self.migrator.migrate(client, logger: logger)
    }

    static let columns = """
        id, email, email_normalized, email_verified, display_name, photo_url, password_hash, is_anonymous, disabled, \
        custom_claims, settings, created_at, updated_at, last_sign_in_at, tokens_valid_after, version, providers
        """

    // MARK: UserStore

    /// Inserts a new user; `emailExists` when its normalized email is taken.
    public func insert(_ user: UserRecord) async throws {
        try await run { connection in try await Self.insert(user, on: connection, logger: self.logger) }
    }

    static func insert(_ u: UserRecord, on connection: PostgresConnection, logger: Logger) async throws {
        let providers = u.linkedProviders.joined(separator: ",")
        try await connection.query(
            """
            INSERT INTO users (\(unescaped: columns)) VALUES (\(u.id.rawValue), \(u.email), \(u.emailNormalized), \(u.emailVerified),
                \(u.displayName), \(u.photoURL), \(u.passwordHash), \(u.isAnonymous), \(u.disabled), \(u.customClaimsJSON),
                \(u.settingsJSON), \(u.createdAt.millisecondsSince1970), \(u.updatedAt.millisecondsSince1970), \(u.lastSignInAt?.millisecondsSince1970),
                \(u.tokensValidAfter?.millisecondsSince1970), \(u.version), \(providers))
            """, logger: logger)
    }

    /// The user with this id, or nil.
    public func user(id: UserID) async throws -> UserRecord? {
        try await run { connection in try await Self.firstUser(UserByID(id: id.rawValue), on: connection, logger: self.queryLogger) }
    }

    /// The user with this normalized email, or nil.
    public func user(normalizedEmail: String) async throws -> UserRecord? {
        try await run { connection in
            try await Self.firstUser(UserByEmail(normalizedEmail: normalizedEmail), on: connection, logger: self.queryLogger)
        }
    }

    static func user(
        where column: StaticString, _ value: String, forUpdate: Bool = false, on connection: PostgresConnection, logger: Logger
    ) async throws -> UserRecord? {
        let lock = forUpdate ? " FOR UPDATE" : ""
        let rows = try await connection.query(
            "SELECT \(unescaped: columns) FROM users WHERE \(unescaped: "\(column)") = \(value)\(unescaped: lock)", logger: logger)
        for try await row in rows { return try record(row) }
        return nil
    }

    /// Writes a changed user if the stored version is `expectedVersion` (`versionConflict` otherwise).
    public func update(
        id: UserID, expectedVersion: Int64?, now: Date, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await transaction { connection in
            try await Self.updateUser(id: id, expectedVersion: expectedVersion, now: now, on: connection, logger: self.queryLogger, change)
        }
    }

    /// The one write of a changed user, inside the caller's transaction (every part's updates go
    /// through it): the row locked, the version checked when `expectedVersion` is given, `change`
    /// applied, the version moved, `updatedAt` set; `userNotFound` when there is no user.
    static func updateUser(
        id: UserID, expectedVersion: Int64? = nil, now: Date, on connection: PostgresConnection, logger: Logger,
        _ change: (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        guard var user = try await user(where: "id", id.rawValue, forUpdate: true, on: connection, logger: logger) else {
            throw IdentityError.userNotFound
        }
        if let expectedVersion, expectedVersion != user.version { throw IdentityError.versionConflict(current: user.version) }
        let previous = user.version
        try change(&user)
        user.id = id
        user.version = previous + 1
        user.updatedAt = now.roundedToMilliseconds
        let u = user
        let providers = u.linkedProviders.joined(separator: ",")
        let changed = try await connection.query(
            """
            UPDATE users SET email = \(u.email), email_normalized = \(u.emailNormalized), email_verified = \(u.emailVerified),
                display_name = \(u.displayName), photo_url = \(u.photoURL), password_hash = \(u.passwordHash),
                is_anonymous = \(u.isAnonymous), disabled = \(u.disabled), custom_claims = \(u.customClaimsJSON),
                settings = \(u.settingsJSON), created_at = \(u.createdAt.millisecondsSince1970), updated_at = \(u.updatedAt.millisecondsSince1970),
                last_sign_in_at = \(u.lastSignInAt?.millisecondsSince1970), tokens_valid_after = \(u.tokensValidAfter?.millisecondsSince1970),
                version = \(u.version), providers = \(providers)
            WHERE id = \(id.rawValue) AND version = \(previous)
            RETURNING id
            """, logger: logger
        ).collect()
        guard changed.count == 1 else { throw IdentityError.versionConflict(current: previous) }
        return u
    }

    /// Stamps a sign-in; stores an upgraded hash only while the stored one is still `replacing`.
    public func recordSignIn(id: UserID, at: Date, newPasswordHash: String?, replacing: String?) async throws {
        // A transaction: the running call's audit event (the sign-in) commits with the stamp.
        try await transaction { connection in
            let rows = try await connection.query(
                """
                UPDATE users SET last_sign_in_at = \(at.millisecondsSince1970),
                    password_hash = CASE WHEN \(newPasswordHash)::text IS NOT NULL AND password_hash IS NOT DISTINCT FROM \(replacing)::text
                        THEN \(newPasswordHash)::text ELSE password_hash END
                WHERE id = \(id.rawValue) RETURNING id
                """, logger: self.logger)
            var changed = 0
            for try await _ in rows { changed += 1 }
            guard changed == 1 else { throw IdentityError.userNotFound }
        }
    }

    /// Deletes the user and its identities; `userNotFound` when there is none.
    public func delete(id: UserID) async throws {
        try await deleteUser("DELETE FROM users WHERE id = \(id.rawValue) RETURNING id")
    }

    /// Deletes the user only while it is anonymous; `userNotFound` otherwise.
    public func deleteAnonymous(id: UserID) async throws {
        try await deleteUser("DELETE FROM users WHERE id = \(id.rawValue) AND is_anonymous RETURNING id")
    }

    private func deleteUser(_ query: PostgresQuery) async throws {
        // A transaction: the running call's audit event commits with the deletion.
        try await transaction { connection in
            var deleted = 0
            for try await _ in try await connection.query(query, logger: self.logger) { deleted += 1 }
            guard deleted == 1 else { throw IdentityError.userNotFound }
        }
    }

    /// Links a provider identity (`provider`, `subject`) to a user, and lists it on the user's row.
    public func linkIdentity(provider: String, subject: String, to user: UserID, at: Date) async throws {
        try await transaction { connection in
            // The user's row first: two links at once would each compute `providers` without the other's.
            guard try await !connection.query("SELECT 1 FROM users WHERE id = \(user.rawValue) FOR UPDATE", logger: self.queryLogger).collect().isEmpty else {
                throw IdentityError.userNotFound
            }
            try await connection.query(
                "INSERT INTO identities (provider, subject, user_id, created_at) VALUES (\(provider), \(subject), \(user.rawValue), \(at.millisecondsSince1970))",
                logger: self.logger)
            try await connection.query(
                """
                UPDATE users SET providers = (SELECT string_agg(p, ',' ORDER BY p COLLATE "C") FROM
                        (SELECT DISTINCT provider AS p FROM identities WHERE user_id = \(user.rawValue)) linked),
                    updated_at = greatest(updated_at, \(at.millisecondsSince1970))
                WHERE id = \(user.rawValue)
                """, logger: self.logger)
        }
    }

    /// The user a provider identity is linked to, or nil.
    public func userID(provider: String, subject: String) async throws -> UserID? {
        try await run { connection in
            let rows = try await connection.query(
                "SELECT user_id FROM identities WHERE provider = \(provider) AND subject = \(subject)", logger: self.logger)
            for try await id in rows.decode(String.self) { return UserID(rawValue: id) }
            return nil
        }
    }

    /// The number of users.
    public func count() async throws -> Int {
        try await run { connection in
            for try await n in try await connection.query("SELECT count(*) FROM users", logger: self.logger).decode(Int64.self) {
                return Int(n)
            }
            return 0
        }
    }

    // MARK: Access

    /// Runs `body` on a pooled connection; errors translated. While the database does not answer
    /// (`DatabaseHealth`), fails at once with `unavailable`; a deadlock the server broke is tried
    /// again (up to three times).
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await health.run(PostgresTokenStore.isConnectionFailure, body)
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "40P01" && attempt < 3 {
                attempt += 1
                logger.notice("identity store: deadlock broken by the server; trying again")
            } catch is DatabaseHealth.Unavailable {
                throw IdentityError.unavailable(cause: "the identity database is unavailable")
            } catch {
                throw Self.translate(error)
            }
        }
    }

    /// Runs `body` in a transaction (READ COMMITTED; rolled back when it throws); errors
    /// translated. The running call's pending audit event (`AuditScope.current`) is appended in
    /// the same transaction, so an event is recorded exactly when its change commits.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let audit = AuditScope.current
        do {
            let result = try await run { [self] connection in
                try await connection.inTransaction(logger: queryLogger) {
                    let result = try await body(connection)
                    if let audit, let event = audit.take() {
                        do { try await Self.appendAudit(event, on: connection, logger: queryLogger) } catch {
                            audit.settle(committed: false)
                            throw error
                        }
                    }
                    return result
                }
            }
            audit?.settle(committed: true)
            return result
        } catch {
            audit?.settle(committed: false)
            throw error
        }
    }

    /// Turns a PostgreSQL error into the `IdentityError` the SQLite store gives for the same case.
    static func translate(_ error: any Error) -> any Error {
        if error is IdentityError || error is CancellationError || error is IdentityCopyError { return error }
        guard let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] else {
            return IdentityError.unavailable(cause: String(reflecting: error))
        }
        let constraint = error.serverInfo?[.constraintName] ?? ""
        switch state {
        case "23505" where constraint.contains("email_normalized"):
            return IdentityError.emailExists
        // The email reservation's trigger (migration 0005): an address an unused revert code keeps
        // for its user, as SQLite's `email_reserved`.
        case "23505" where constraint == "users_email_reserved":
            return IdentityError.emailExists
        case "23505" where constraint.hasPrefix("identities"):
            return IdentityError.invalidArgument(field: "identity", reason: "already linked to a user")
        case "23503":
            return IdentityError.userNotFound
        case "23514", "23502", "22P02", "22P05", "22023", "22001":
            return IdentityError.invalidArgument(field: "user", reason: "breaks a storage invariant")
        case "08000", "08003", "08006", "57P01", "57P02", "57P03", "53300":
            return IdentityError.unavailable(cause: "PostgreSQL \(state)")
        default:
            return IdentityError.storage(cause: "PostgreSQL \(state): \(error.serverInfo?[.message] ?? "")")
        }
    }

    static func record(_ row: PostgresRow) throws -> UserRecord {
        let (id, email, normalized, verified, name, photo, hash, anonymous, disabled, claims, settings, created, updated, signedIn,
             validAfter, version, providers) = try row.decode(
            (String, String?, String?, Bool, String?, String?, String?, Bool, Bool, String, String, Int64, Int64, Int64?, Int64?,
             Int64, String).self)
        var user = UserRecord(id: UserID(rawValue: id), email: nil, createdAt: Date(millisecondsSince1970: created))
        user.email = email
        user.emailNormalized = normalized
        user.emailVerified = verified
        user.displayName = name
        user.photoURL = photo
        user.passwordHash = hash
        user.isAnonymous = anonymous
        user.disabled = disabled
        user.customClaimsJSON = claims
        user.settingsJSON = settings
        user.updatedAt = Date(millisecondsSince1970: updated)
        user.lastSignInAt = signedIn.map(Date.init(millisecondsSince1970:))
        user.tokensValidAfter = validAfter.map(Date.init(millisecondsSince1970:))
        user.version = version
        user.linkedProviders = providers.isEmpty ? [] : providers.split(separator: ",").map(String.init)
        return user
    }
}

extension PostgresUserStore: LeaderElection {
    /// Runs `body` if this instance takes the session advisory lock of `job` (a key derived from
    /// "gatehouse.identity." + job; `AdvisoryLead`); whether it ran. Errors of `body` pass through
    /// unchanged. Needs a pool of at least two connections: the lock holds one while `body` runs.
    public func runIfLeader(_ job: String, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        try await AdvisoryLead(client: client, logger: logger, label: "identity store")
            .runIfLeader("gatehouse.identity." + job, translate: Self.translate, body)
    }
}

extension PostgresUserStore: IdentityStorage {}
