import Crypto
import Foundation
import TokenPorts
@testable import SQLiteStores
import GatehouseContracts
import GatehouseTestSupport
import Logging
import PostgresNIO
import PostgresStores
import PostgresSupport
import ProtoCodec
import Testing
import TokenCore
@testable import TokenService
import RPCRouting

/// The stores the store-neutral suites run against: SQLite's file (`SQLiteTokenStore`) and a
/// PostgreSQL database of the test process's shared server (`PostgresTokenStore`, issue 24).
enum TokenStoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }
}

/// A fresh database on the test process's PostgreSQL server (`PostgresServer.shared()`).
struct PostgresDatabase: Sendable {
    let url: String

    static func make() async throws -> PostgresDatabase {
        let server = try await PostgresServer.shared()
        return PostgresDatabase(url: server.url(database: try await server.createDatabase()))
    }

    /// A store on a client of its own (its own pool, as another instance has), running while
    /// the returned client lives. Not migrated: `TokenService.start` migrates.
    func store(maximumConnections: Int = 4) throws -> (store: PostgresTokenStore, client: RunningClient) {
        var logger = Logger(label: "token-tests.postgres")
        logger.logLevel = .error  // not the pool's notice that a lease came before run() began
        let configuration = try PostgresSettings(url: url).clientConfiguration(maximumConnections: maximumConnections)
        let running = RunningClient(PostgresClient(configuration: configuration, backgroundLogger: logger))
        return (PostgresTokenStore(client: running.client, logger: logger), running)
    }
}

/// A `PostgresClient` running until this object goes (its connections close then).
final class RunningClient: Sendable {
    let client: PostgresClient
    private let task: Task<Void, Never>

    init(_ client: PostgresClient) {
        self.client = client
        task = Task { await client.run() }
    }

    /// Stops the client (its pool shuts down).
    func stop() { task.cancel() }

    /// Returns once the client has stopped.
    func stopped() async { await task.value }

    deinit { task.cancel() }
}

/// A token service on a fresh SQLite file or PostgreSQL database, with a manual clock, a fake
/// identity service and a recording event sink.
struct Harness {
    let service: TokenService
    let clock: ManualClock
    let identity: FakeIdentityService
    let events: RecordingEventSink
    let dir: URL
    let kind: TokenStoreKind
    /// The database of a PostgreSQL harness.
    let database: PostgresDatabase?
    /// Keeps a PostgreSQL harness's client running as long as the harness is in use.
    let client: RunningClient?

    /// A service on `kind`'s store: the SQLite file in `dir` (new when nil) or `database` (new
    /// when nil); `configure` adjusts the settings.
    static func make(
        _ kind: TokenStoreKind = .sqlite, algorithm: SigningAlgorithm = .es256, encryptionKey: [UInt8]? = nil, dir: URL? = nil,
        database: PostgresDatabase? = nil, clock: ManualClock = ManualClock(),
        identity: FakeIdentityService = FakeIdentityService(), events: RecordingEventSink = RecordingEventSink(),
        configure: (inout TokenConfiguration) -> Void = { _ in }
    ) async throws -> Harness {
        let dir = try dir ?? TemporaryDirectory(prefix: "token-tests").url
        var config = TokenConfiguration(issuer: "https://auth.test", audience: "app")
        config.algorithm = algorithm
        if let encryptionKey { config.encryptionKey = .init(data: encryptionKey) }
        configure(&config)
        switch kind {
        case .sqlite:
            let service = try await TokenService.start(
                configuration: config, store: SQLiteTokenStore(path: dir.appendingPathComponent("token.sqlite").path),
                identity: identity.caller, publish: events.record, clock: clock.wallClock)
            return Harness(
                service: service, clock: clock, identity: identity, events: events, dir: dir, kind: kind, database: nil, client: nil)
        case .postgres:
            let database = if let database { database } else { try await PostgresDatabase.make() }
            let (store, client) = try database.store()
            var logger = Logger(label: "token-tests.service")
            logger.logLevel = .error  // not a shared feed's warning when a test ends with its client
            let service = try await TokenService.start(
                configuration: config, store: store, identity: identity.caller, publish: events.record, clock: clock.wallClock,
                logger: logger)
            return Harness(
                service: service, clock: clock, identity: identity, events: events, dir: dir, kind: kind, database: database,
                client: client)
        }
    }

    /// The SQLite file of a SQLite harness.
    var databasePath: String { dir.appendingPathComponent("token.sqlite").path }

    /// Another service on the same store (the same file, or the same database), as after a
    /// restart, or beside this one.
    func reopen(encryptionKey: [UInt8]? = nil, events: RecordingEventSink = RecordingEventSink()) async throws -> Harness {
        try await Harness.make(kind, encryptionKey: encryptionKey, dir: dir, database: database, clock: clock, events: events)
    }

    func issue(user: String = "user-1", email: String = "a@example.com") async throws -> SessionTokens {
        identity.set(user, UserClaims(email: email, emailVerified: true))
        return try await service.issueSession(IssueSessionRequest(
            userID: user, claims: UserClaims(email: email, emailVerified: true), amr: ["pwd"], authTime: clock.now,
            client: ClientInfo(userAgent: "tests", ip: "127.0.0.1")))
    }

    /// Waits until the feed has published every committed revocation: at once with SQLite (the
    /// service publishes each as it commits); with a shared store, the feed reads the
    /// database's log (`catchUp`, which also beats a heartbeat).
    func settle() async {
        if kind == .postgres { await service.revocationFeed.catchUp() }
    }

    /// The topics published once settled, without the heartbeats settling beat.
    func settledTopics() async -> [String] {
        await settle()
        return events.topics.filter { kind == .sqlite || $0 != TokenAPI.Topic.heartbeat }
    }

    /// The `session.revoked` events published once settled.
    func revokedEvents() async throws -> [SessionRevokedEvent] {
        await settle()
        return try events.events.filter { $0.topic == TokenAPI.Topic.sessionRevoked }.map {
            try ProtobufDecoder().decode(SessionRevokedEvent.self, from: $0.payload)
        }
    }
}

/// Asserts `body` fails with the wire code `code`.
func expectCode<T>(_ code: ErrorCode, _ body: () async throws -> T) async -> Bool {
    do {
        _ = try await body()
        return false
    } catch let error as TokenError {
        return error.code == code
    } catch let error as RPCError {
        return error.code == code
    } catch {
        return false
    }
}
