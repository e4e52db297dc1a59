import Logging
import PostgresSupport
import PostgresStores
import PostgresNIO
import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
import IdentityService

extension TemporaryDirectory {
    /// `users.sqlite` in the folder.
    var databasePath: String { path("users.sqlite") }

    /// A store on `databasePath`, opened and migrated.
    func migratedStore() async throws -> SQLiteUserStore {
        let store = try await SQLiteUserStore.open(path: databasePath)
        try await store.migrate()
        return store
    }
}

/// The stores of the `UserStore` contract: the two of `StoreKind` and PostgreSQL (issue 24; a
/// database of the test process's shared server).
enum UserStoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }

    func make() async throws -> (store: any IdentityStorage, cleanup: @Sendable () -> Void) {
        switch self {
        case .sqlite: return try await StoreKind.sqlite.make()
        case .postgres: return try await StoreKind.postgres.make()
        }
    }
}

/// The stores a handler suite runs against. `allCases` is the SQLite and PostgreSQL stores;
/// `.postgres` is a fresh database on the test process's PostgreSQL server
/// (`PostgresServer.shared()`), migrated, on a client of its own. `kept` is the stores that keep
/// the whole service (`IdentityStorage`): SQLite and PostgreSQL.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }

    static let allCases: [StoreKind] = [.sqlite, .postgres]
    /// The stores that keep everything: a suite of the flows beyond the user contract runs on these.
    static let kept: [StoreKind] = [.sqlite, .postgres]

    func make() async throws -> (store: any IdentityStorage, cleanup: @Sendable () -> Void) {
        switch self {
        case .sqlite:
            let dir = try TemporaryDirectory(prefix: "identity-tests")
            let store = try await dir.migratedStore()
            return (store, { dir.remove() })
        case .postgres:
            let (store, cleanup) = try await Self.postgresStore()
            return (store, cleanup)
        }
    }

    /// A migrated `PostgresUserStore` on a fresh database, and what stops its client.
    static func postgresStore(maximumConnections: Int = 4) async throws -> (store: PostgresUserStore, cleanup: @Sendable () -> Void) {
        let server = try await PostgresServer.shared()
        let database = try await server.createDatabase()
        let settings = try PostgresSettings(url: server.url(database: database))
        var logger = Logger(label: "identity-tests.postgres")
        logger.logLevel = .error  // not the pool's notice that a lease came before run() began
        let client = PostgresClient(
            configuration: try settings.clientConfiguration(maximumConnections: maximumConnections), backgroundLogger: logger)
        let running = Task { await client.run() }
        let store = PostgresUserStore(client: client, logger: logger)
        try await store.migrate()
        return (store, { running.cancel() })
    }
}

import Testing
import RPCRouting

/// Asserts that `body` throws an error whose wire code is `code`.
func expectCode<T>(
    _ code: ErrorCode, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T
) async {
    do {
        _ = try await body()
        Issue.record("expected \(code), got success", sourceLocation: sourceLocation)
    } catch let error as IdentityError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

let t0 = Date(timeIntervalSince1970: 1_700_000_000)

/// `SQLiteUserStore.insertSQL` as the schema before migration 0015 spelled it (camelCase columns,
/// in the same order: `SQLiteUserStore.arguments` fits it), for tests that fill an older database.
let legacyInsertUserSQL = """
    INSERT INTO users (id, email, emailNormalized, emailVerified, displayName, photoURL, passwordHash, isAnonymous, disabled,
        customClaims, settings, createdAt, updatedAt, lastSignInAt, tokensValidAfter, version, providers)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    """

func makeUser(_ email: String, at date: Date = t0, hash: String? = "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA") throws -> UserRecord {
    UserRecord(id: .random(), email: try EmailAddress(email), passwordHash: hash, createdAt: date)
}

/// Handlers over a store, with cheap Argon2 parameters, a fake token service, a recording sink
/// and a manual clock.
struct Harness {
    let store: any IdentityStorage
    let handlers: IdentityHandlers
    let caller: LocalCaller
    let tokens: FakeTokenService
    let clock: ManualClock
    let events: RecordingEventSink
    let pool: HashPool
    let cleanup: @Sendable () -> Void

    init(
        kind: StoreKind = .sqlite, argon2: Argon2Parameters = .testing, queueLimit: Int = 64,
        throttle: PasswordAttemptThrottle.Settings = PasswordAttemptThrottle.Settings()
    ) async throws {
        let (store, cleanup) = try await kind.make()
        self.store = store
        self.cleanup = cleanup
        tokens = FakeTokenService()
        clock = ManualClock(start: Date(timeIntervalSince1970: 1_750_000_000.123))
        events = RecordingEventSink()
        pool = HashPool(workers: 2, queueLimit: queueLimit)
        handlers = IdentityHandlers(
            store: store, hasher: PasswordHasher(parameters: argon2, pool: pool), policy: PasswordPolicy(),
            tokens: tokens.caller, events: events, clock: clock.wallClock,
            throttle: PasswordAttemptThrottle(settings: throttle, clock: clock.wallClock))
        caller = LocalCaller(router: handlers.router())
    }
}
