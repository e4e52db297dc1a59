import Foundation
import Mail
import GatehouseContracts
import IdentityPorts
import GatehouseSupport
import GRDB
import IdentityCore
import SQLiteSupport

/// The users database: one SQLite file in WAL mode, accessed through GRDB 7.
///
/// Why GRDB rather than sqlite-nio: GRDB gives a `DatabasePool` (one writer, concurrent WAL
/// readers) whose async `read`/`write` run on GRDB's own serial dispatch queues, so SQLite never
/// blocks Swift's cooperative pool; a `DatabaseMigrator` for numbered, forward-only migrations;
/// cached prepared statements for the hot look-ups; and typed result codes for translating
/// constraint violations. sqlite-nio would add SwiftNIO and event-loop futures that nothing else
/// in this service needs, and leave migrations and statement caching to us.
///
/// Durability: WAL with `synchronous = NORMAL` (the default, `.processCrash`) makes every
/// committed transaction survive a crash or `kill -9` of the process (the WAL is written before
/// commit returns; only the OS may still hold it). `.powerLoss` uses `synchronous = FULL`, which
/// also fsyncs the WAL at each commit, for surviving a power cut at about twice the write cost.
///
/// No `DatabaseError` leaves this type: constraint violations become `emailExists`,
/// `userNotFound` or `invalidArgument`; busy/locked become `unavailable`; the rest `storage`.
public final class SQLiteUserStore: UserStore, SynchronousPointReads {
    /// How far an acknowledged write survives.
    public typealias Durability = SQLiteSupport.Durability

    let files: SQLiteFiles
    var pool: DatabasePool { files.pool }
    /// Checkpoints the WAL off the writer's path (see `WALCheckpointer`).
    var checkpointer: WALCheckpointer { files.checkpointer }
    /// Connections of its own for the point reads by id and email (see `RawReadPool`).
    private var pointReads: RawReadPool { files.pointReads }

    /// Opens (creating if needed) the database at `path`. Does not migrate: call `migrate()`.
    /// Opening is synchronous file I/O; from async code prefer `open(path:durability:)`.
    public init(path: String, durability: Durability = .processCrash) throws {
        do {
            files = try SQLiteFiles(path: path, label: "identity", durability: durability) { ThreadName.set("wal-checkpoint") }
        } catch {
            throw Self.translate(error)
        }
    }

    /// Opens the database off the cooperative pool.
    public static func open(path: String, durability: Durability = .processCrash) async throws -> SQLiteUserStore {
        try await offCooperativePool { try SQLiteUserStore(path: path, durability: durability) }
    }

    /// Applies every migration not yet applied. An explicit start-up step, run before serving.
    public func migrate() async throws {
        let files = files
        try await Self.offCooperativePool {
            do { try files.migrate(Self.migrator) } catch { throw Self.translate(error) }
        }
    }

    /// The identifiers of the applied migrations, in order.
    public func appliedMigrations() async throws -> [String] {
        try await run { db in try Self.migrator.appliedMigrations(db) }
    }

    /// The numbered, forward-only migrations. Never edit one that has shipped: add the next.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("0001-users-and-identities") { db in
            try db.execute(sql: """
                CREATE TABLE users (
                    id TEXT NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 22 AND 64),
                    email TEXT CHECK (email IS NULL OR length(CAST(email AS BLOB)) BETWEEN 3 AND 254),
                    emailNormalized TEXT UNIQUE
                        CHECK (emailNormalized IS NULL OR length(CAST(emailNormalized AS BLOB)) BETWEEN 3 AND 254),
                    emailVerified INTEGER NOT NULL DEFAULT 0 CHECK (emailVerified IN (0, 1)),
                    displayName TEXT CHECK (displayName IS NULL OR length(displayName) <= 256),
                    photoURL TEXT CHECK (photoURL IS NULL OR length(photoURL) <= 2048),
                    passwordHash TEXT CHECK (passwordHash IS NULL OR length(passwordHash) <= 1024),
                    isAnonymous INTEGER NOT NULL DEFAULT 0 CHECK (isAnonymous IN (0, 1)),
                    disabled INTEGER NOT NULL DEFAULT 0 CHECK (disabled IN (0, 1)),
                    customClaims TEXT NOT NULL DEFAULT '' CHECK (
                        customClaims = '' OR (length(CAST(customClaims AS BLOB)) <= 1000
                            AND json_valid(customClaims) AND json_type(customClaims) = 'object')),
                    settings TEXT NOT NULL DEFAULT '{}' CHECK (
                        length(CAST(settings AS BLOB)) <= 16384 AND json_valid(settings) AND json_type(settings) = 'object'),
                    createdAt INTEGER NOT NULL,
                    updatedAt INTEGER NOT NULL,
                    lastSignInAt INTEGER,
                    tokensValidAfter INTEGER,
                    version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
                    CHECK ((email IS NULL) = (emailNormalized IS NULL)),
                    CHECK (isAnonymous = 1 OR emailNormalized IS NOT NULL)
                ) STRICT;

                CREATE TABLE identities (
                    provider TEXT NOT NULL CHECK (length(provider) BETWEEN 1 AND 64),
                    subject TEXT NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
                    userId TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    createdAt INTEGER NOT NULL,
                    PRIMARY KEY (provider, subject)
                ) STRICT;
                CREATE INDEX identities_userId ON identities(userId);
                """)
        }
        migrator.registerMigration("0002-user-providers") { db in
            // The providers linked to the user (comma-separated, sorted), kept with the row so
            // `GET /v1/me` stays one point read; `identities` stays the index by subject.
            try db.execute(sql: """
                ALTER TABLE users ADD COLUMN providers TEXT NOT NULL DEFAULT '' CHECK (length(providers) <= 1024);
                """)
        }
        for register in [
            registerAnonymousSweepMigration, registerOutboxMigration, registerPasswordResetMigration, registerEmailActionsMigration, registerEmailReservationMigration, registerChangeLogMigration, registerChangeLogCapCheckMigration,
            registerAuditMigration, registerAdminKeysMigration, registerProviderUsersMigration, registerAppleTokensMigration,
            registerSnakeCaseColumnsMigration,
        ] { register(&migrator) }
        return migrator
    }

    // MARK: UserStore

    private static let columns = """
        id, email, email_normalized, email_verified, display_name, photo_url, password_hash, is_anonymous, disabled, \
        custom_claims, settings, created_at, updated_at, last_sign_in_at, tokens_valid_after, version, providers
        """
    // Built once: the statement cache is keyed by the SQL text.
    static let insertSQL = "INSERT INTO users (\(columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    static let selectByIDSQL = "SELECT \(columns) FROM users WHERE id = ?"
    // Internal (not private) so a test can check its query plan.
    static let selectByEmailSQL = "SELECT \(columns) FROM users WHERE email_normalized = ?"

    /// Inserts a new user; `emailExists` when its normalized email is taken.
    public func insert(_ user: UserRecord) async throws {
        try await run { db in
            let statement = try db.cachedStatement(sql: Self.insertSQL)
            try statement.execute(arguments: Self.arguments(user))
        }
    }

    // The point reads by id and email run on the calling thread, on connections of their own
    // (`RawReadPool`): no hop to a GRDB queue. In WAL mode a reader never waits for the
    // writer, and one indexed look-up costs less than the two thread wake-ups of GRDB's async
    // read; the identity service serves them as synchronous RPC handlers on its I/O thread.
    private static let rawSelectByIDSQL = "/* raw */ " + selectByIDSQL
    static let rawSelectByEmailSQL = "/* raw */ " + selectByEmailSQL

    /// The user with this id, or nil.
    public func user(id: UserID) async throws -> UserRecord? {
        try userNow(id: id)
    }

    /// The user with this normalized email, or nil.
    public func user(normalizedEmail: String) async throws -> UserRecord? {
        try userNow(normalizedEmail: normalizedEmail)
    }

    /// `user(id:)` on the calling thread, for callers that are not async.
    public func userNow(id: UserID) throws -> UserRecord? {
        do { return try pointReads.read(sql: Self.rawSelectByIDSQL, arguments: [.text(id.rawValue)], Self.record) } catch {
            throw Self.translate(error)
        }
    }

    /// `user(normalizedEmail:)` on the calling thread, for callers that are not async.
    public func userNow(normalizedEmail: String) throws -> UserRecord? {
        do { return try pointReads.read(sql: Self.rawSelectByEmailSQL, arguments: [.text(normalizedEmail)], Self.record) } catch {
            throw Self.translate(error)
        }
    }

    /// Writes a changed user if the stored version is `previousVersion` (`versionConflict` otherwise).
    public func update(
        id: UserID, expectedVersion: Int64?, now: Date, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        try await run { db in try Self.update(id: id, expectedVersion: expectedVersion, now: now, in: db, change) }
    }

    /// `update` inside the caller's transaction (a change and what must commit with it).
    static func update(id: UserID, expectedVersion: Int64?, now: Date, in db: Database, _ change: (inout UserRecord) throws -> Void) throws -> UserRecord {
        let select = try db.cachedStatement(sql: Self.selectByIDSQL)
        guard let row = try Row.fetchOne(select, arguments: [id.rawValue]) else { throw IdentityError.userNotFound }
        var user = Self.record(row)
        if let expectedVersion, expectedVersion != user.version {
            throw IdentityError.versionConflict(current: user.version)
        }
        let previousVersion = user.version
        try change(&user)
        user.id = id
        user.version = previousVersion + 1
        user.updatedAt = now.roundedToMilliseconds
        let update = try db.cachedStatement(sql: """
            UPDATE users SET email = ?, email_normalized = ?, email_verified = ?, display_name = ?, photo_url = ?,
                password_hash = ?, is_anonymous = ?, disabled = ?, custom_claims = ?, settings = ?, created_at = ?,
                updated_at = ?, last_sign_in_at = ?, tokens_valid_after = ?, version = ?, providers = ?
            WHERE id = ? AND version = ?
            """)
        var values = Self.values(user)
        values.removeFirst()
        values += [id.rawValue, previousVersion]
        try update.execute(arguments: StatementArguments(values))
        guard db.changesCount == 1 else { throw IdentityError.versionConflict(current: previousVersion) }
        return user
    }

    /// Stamps a sign-in; stores an upgraded hash only while the stored one is still `replacing`.
    public func recordSignIn(id: UserID, at: Date, newPasswordHash: String?, replacing: String?) async throws {
        try await run { db in
            if let newPasswordHash {
                let statement = try db.cachedStatement(sql: """
                    UPDATE users SET last_sign_in_at = ?, password_hash = CASE WHEN password_hash IS ? THEN ? ELSE password_hash END
                    WHERE id = ?
                    """)
                try statement.execute(arguments: [at.millisecondsSince1970, replacing, newPasswordHash, id.rawValue])
            } else {
                let statement = try db.cachedStatement(sql: "UPDATE users SET last_sign_in_at = ? WHERE id = ?")
                try statement.execute(arguments: [at.millisecondsSince1970, id.rawValue])
            }
            guard db.changesCount == 1 else { throw IdentityError.userNotFound }
        }
    }

    /// Deletes the user and its linked identities; `userNotFound` when there is none. The freed
    /// bytes are overwritten in the file (`secure_delete`), not only unlinked.
    public func delete(id: UserID) async throws {
        guard try await deleteUserRow(sql: "DELETE FROM users WHERE id = ?", [id.rawValue]) else { throw IdentityError.userNotFound }
    }

    /// Links a provider identity (`provider`, `subject`) to a user.
    public func linkIdentity(provider: String, subject: String, to user: UserID, at: Date) async throws {
        try await run { db in
            let statement = try db.cachedStatement(
                sql: "INSERT INTO identities (provider, subject, user_id, created_at) VALUES (?, ?, ?, ?)")
            try statement.execute(arguments: [provider, subject, user.rawValue, at.millisecondsSince1970])
            // The user's row lists its providers (sorted, each once), in the same transaction.
            let linked = try String.fetchAll(
                db, sql: "SELECT DISTINCT provider FROM identities WHERE user_id = ? ORDER BY provider", arguments: [user.rawValue])
            try db.execute(
                sql: Self.setProvidersSQL, arguments: [linked.joined(separator: ","), at.millisecondsSince1970, user.rawValue])
        }
    }

    /// The user a provider identity is linked to, or nil: a point read on the calling thread,
    /// as `user(id:)` (a provider sign-in makes two).
    public func userID(provider: String, subject: String) async throws -> UserID? {
        do {
            return try pointReads.read(
                sql: "/* raw */ SELECT user_id FROM identities WHERE provider = ? AND subject = ?",
                arguments: [.text(provider), .text(subject)]
            ) { UserID(rawValue: $0.string(0)) }
        } catch {
            throw Self.translate(error)
        }
    }

    /// The number of users.
    public func count() async throws -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM users") ?? 0 }
    }

    /// The number of linked identities (for tests).
    public func identityCount() async throws -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM identities") ?? 0 }
    }

    /// Synchronous insert, for tools that are not async (the crash-writer test helper).
    public func insertSync(_ user: UserRecord) throws {
        do {
            try pool.write { db in
                let statement = try db.cachedStatement(sql: Self.insertSQL)
                try statement.execute(arguments: Self.arguments(user))
            }
        } catch {
            throw Self.translate(error)
        }
    }

    /// Synchronous insert of many users in one transaction, for bulk tools (imports, benchmark
    /// fixtures). All or nothing: one refused row rolls back the batch.
    public func insertManySync(_ users: [UserRecord]) throws {
        do {
            try pool.write { db in
                let statement = try db.cachedStatement(sql: Self.insertSQL)
                for user in users { try statement.execute(arguments: Self.arguments(user)) }
            }
        } catch {
            throw Self.translate(error)
        }
    }

    /// Synchronous migrate, for tools that are not async.
    public func migrateSync() throws {
        do { try files.migrate(Self.migrator) } catch { throw Self.translate(error) }
    }

    /// A PRAGMA's value (for tests: `journal_mode`, `foreign_keys`, `synchronous`).
    public func pragma(_ name: String) async throws -> String? {
        guard name.allSatisfy({ $0.isLetter || $0 == "_" }) else { return nil }
        return try await read { db in try String.fetchOne(db, sql: "PRAGMA \(name)") }
    }

    // MARK: Mapping

    static func arguments(_ u: UserRecord) -> StatementArguments { StatementArguments(values(u)) }

    private static func values(_ u: UserRecord) -> [(any DatabaseValueConvertible)?] {
        [
            u.id.rawValue, u.email, u.emailNormalized, u.emailVerified, u.displayName, u.photoURL, u.passwordHash,
            u.isAnonymous, u.disabled, u.customClaimsJSON, u.settingsJSON, u.createdAt.millisecondsSince1970,
            u.updatedAt.millisecondsSince1970, u.lastSignInAt?.millisecondsSince1970,
            u.tokensValidAfter?.millisecondsSince1970, u.version, u.linkedProviders.joined(separator: ","),
        ]
    }

    /// A row of `columns`, read straight from SQLite (see `RawStatement`).
    private static func record(_ row: RawRow) -> UserRecord {
        var user = UserRecord(id: UserID(rawValue: row.string(0)), email: nil, createdAt: Date(millisecondsSince1970: row.int64(11)))
        user.email = row.optionalString(1)
        user.emailNormalized = row.optionalString(2)
        user.emailVerified = row.bool(3)
        user.displayName = row.optionalString(4)
        user.photoURL = row.optionalString(5)
        user.passwordHash = row.optionalString(6)
        user.isAnonymous = row.bool(7)
        user.disabled = row.bool(8)
        user.customClaimsJSON = row.string(9)
        user.settingsJSON = row.string(10)
        user.updatedAt = Date(millisecondsSince1970: row.int64(12))
        user.lastSignInAt = row.optionalInt64(13).map(Date.init(millisecondsSince1970:))
        user.tokensValidAfter = row.optionalInt64(14).map(Date.init(millisecondsSince1970:))
        user.version = row.int64(15)
        user.linkedProviders = Self.providers(row.string(16))
        return user
    }

    static func record(_ row: Row) -> UserRecord {
        var user = UserRecord(id: UserID(rawValue: row[0]), email: nil, createdAt: Date(millisecondsSince1970: row[11]))
        user.email = row[1]
        user.emailNormalized = row[2]
        user.emailVerified = row[3]
        user.displayName = row[4]
        user.photoURL = row[5]
        user.passwordHash = row[6]
        user.isAnonymous = row[7]
        user.disabled = row[8]
        user.customClaimsJSON = row[9]
        user.settingsJSON = row[10]
        user.updatedAt = Date(millisecondsSince1970: row[12])
        user.lastSignInAt = (row[13] as Int64?).map(Date.init(millisecondsSince1970:))
        user.tokensValidAfter = (row[14] as Int64?).map(Date.init(millisecondsSince1970:))
        user.version = row[15]
        user.linkedProviders = Self.providers(row[16])
        return user
    }

    private static func providers(_ text: String) -> [String] {
        text.isEmpty ? [] : text.split(separator: ",").map(String.init)
    }

    private static func offCooperativePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }
}

extension SQLiteUserStore: IdentityStorage {
    /// One instance keeps its resume handles in memory: none shared.
    public var sharedResumeHandles: (any SharedResumeHandles)? { nil }
    /// One instance: the verifier's own replay guard is the whole truth.
    public var sharedReplayGuard: (any SharedReplayGuard)? { nil }
    /// Its point reads answer on the calling thread (`userNow(id:)`).
    public var synchronousReads: (any SynchronousPointReads)? { self }

    /// The only instance on its file: it always leads, so `body` runs at once.
    public func runIfLeader(_ job: String, _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
        try await body()
        return true
    }

    /// An empty write transaction: `run` appends the running call's pending audit event.
    public func recordPendingAudit() async throws {
        try await run { _ in }
    }
}
