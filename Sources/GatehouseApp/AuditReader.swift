import Foundation
import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import GRDB
import Logging
import SQLiteSupport

/// Reads the two audit logs for `gatehouse audit` (issue 22 §3): the identity service's
/// (`identity.listAudit`, through an `AdminClient`: the service's own key) and the token
/// service's (`token.listAudit` at `GATEHOUSE_TOKEN_URL`, with the identity service's key pair,
/// which the token service knows as the identity role's, or in plain text), merged by time.
public struct AuditReader: Sendable {
    /// Which service an event comes from.
    public enum Source: String, Sendable, CaseIterable {
        case identity, token
    }

    /// An event and the log it comes from.
    public struct Entry: Sendable, Equatable {
        /// The service whose log holds the event.
        public var source: Source
        /// The event.
        public var event: AuditEvent
    }

    /// Where the next read of each log starts (the last `seq` read, 0 for the start).
    public struct Cursor: Sendable, Equatable {
        /// Position in the identity service's log.
        public var identity: UInt64 = 0
        /// Position in the token service's log.
        public var token: UInt64 = 0
        /// A cursor at the start of both logs.
        public init() {}
    }

    let identity: AdminClient?
    let token: RPCClient?
    let tokenEndpoint: String
    let files: AuditFiles?
    let api: AdminAPIClient?

    /// A reader configured by `config` (the identity role's configuration: with CURVE keys, its
    /// own pair and `GATEHOUSE_TOKEN_PUBLIC_KEY_FILE`).
    public init(config: Config) throws {
        let identity = try AdminClient(config: config)
        self.identity = identity
        files = nil
        tokenEndpoint = try config.endpoint(ConfigTable.tokenURL)
        var configuration = RPCClient.Configuration(endpoint: tokenEndpoint, defaultTimeout: identity.timeout)
        if let own = try LinkSecurity.selfProbeKeys(config) {
            let tokenKey = try LinkSecurity.singleKey(config, ConfigTable.tokenPublicKeyFile)
            configuration.curve = CurveClientKeys(publicKey: own.publicKey, secretKey: own.secretKey, serverPublicKey: tokenKey)
        } else {
            // Plain text, allowed on the same terms as a role's links.
            _ = try LinkSecurity.load(config, role: .gateway, links: [.init(ConfigTable.tokenURL, tokenEndpoint, binds: false)])
        }
        var logger = Logger(label: "gatehouse.audit")
        logger.logLevel = .critical
        token = try RPCClient(configuration: configuration, logger: logger)
        api = nil
    }

    /// A reader of the admin API (`GET /admin/v1/audit`, a key with the `audit` scope): every
    /// shape of deployment, `gatehouse serve` and compose included.
    public init(api: AdminAPIClient) {
        identity = nil
        token = nil
        tokenEndpoint = ""
        files = nil
        self.api = api
    }

    /// A reader of the database files in `dataDir` (`identity.sqlite`, `token.sqlite`), read-only:
    /// for `gatehouse serve`, whose services have no RPC endpoint outside the process.
    public init(dataDir: String) throws {
        identity = nil
        token = nil
        tokenEndpoint = ""
        files = try AuditFiles(dataDir: dataDir)
        api = nil
    }

    /// Every event after `cursor` of `userID` ("" for all), not before `since`, handed to `emit`
    /// in time order (the two logs merged page by page); returns the cursor after the last one.
    public func read(
        after cursor: Cursor, userID: String = "", since: Date? = nil, emit: (Entry) throws -> Void
    ) async throws -> Cursor {
        if let api { return try await readPages(of: api, after: cursor, userID: userID, since: since, emit: emit) }
        var cursor = cursor
        var pages: [Source: [AuditEvent]] = [:]
        var exhausted: Set<Source> = []
        func refill(_ source: Source) async throws {
            guard pages[source, default: []].isEmpty, !exhausted.contains(source) else { return }
            let after = source == .identity ? cursor.identity : cursor.token
            let page = try await list(source, ListAuditRequest(afterSeq: after, userID: userID, limit: 0, since: since))
            pages[source] = page.events
            if page.events.count < Int(maxAuditPage) { exhausted.insert(source) }
        }
        while true {
            for source in Source.allCases { try await refill(source) }
            // The earliest head of the two pages (identity first on a tie).
            let next = Source.allCases.compactMap { source in pages[source]?.first.map { (source, $0) } }
                .min { $0.1.occurredAt < $1.1.occurredAt }
            guard let (source, event) = next else { return cursor }
            pages[source]?.removeFirst()
            if source == .identity { cursor.identity = event.seq } else { cursor.token = event.seq }
            try emit(Entry(source: source, event: event))
        }
    }

    /// `read` through the admin API, whose pages come merged already.
    private func readPages(
        of api: AdminAPIClient, after cursor: Cursor, userID: String, since: Date?, emit: (Entry) throws -> Void
    ) async throws -> Cursor {
        var cursor = cursor
        while true {
            let page = try await api.auditPage(after: "\(cursor.identity).\(cursor.token)", userID: userID, since: since, limit: Int(maxAuditPage))
            for entry in page.events {
                if entry.source == .identity { cursor.identity = entry.event.seq } else { cursor.token = entry.event.seq }
                try emit(entry)
            }
            if !page.more || page.events.isEmpty { return cursor }
        }
    }

    private func list(_ source: Source, _ request: ListAuditRequest) async throws -> ListAuditResponse {
        if let files { return try files.list(source, request) }
        guard let identity, let token else { return ListAuditResponse(events: [], nextAfterSeq: request.afterSeq) }
        switch source {
        case .identity: return try await identity.client.call(IdentityAPI.listAudit, request, timeout: identity.timeout)
        case .token: return try await token.call(TokenAPI.listAudit, request, timeout: identity.timeout)
        }
    }

    /// Closes both connections.
    public func close() async {
        await identity?.close()
        await token?.close()
    }

    /// One line for the operator about a failed read.
    public func describe(_ error: any Error) -> String {
        if let failure = error as? AdminAPIClient.Failure { return failure.description }
        guard let identity else { return "error: \(error)" }
        if let error = error as? RPCError, [.unavailable, .deadlineExceeded, .cancelled].contains(error.code) {
            return "error: no answer from the identity service at \(identity.endpoint) or the token service at \(tokenEndpoint) within \(identity.timeout) (\(error.code.rawValue)); are both running, and are \(ConfigTable.identityURL.env) and \(ConfigTable.tokenURL.env) their RPC endpoints?"
        }
        return identity.describe(error, userID: "")
    }

    // MARK: Output

    /// The entry as one JSON object (a line of `gatehouse audit export` and `tail --json`):
    /// `source`, `seq`, `occurredAt` (RFC 3339, milliseconds), `kind`, `actor`, and each other
    /// field only when set (`detail` as the JSON object it is).
    public static func jsonLine(_ entry: Entry) -> String {
        let e = entry.event
        var object = JSONObjectWriter()
        object.string("source", entry.source.rawValue)
        object.int("seq", Int(clamping: e.seq))
        object.string("occurredAt", timestamp(e.occurredAt))
        object.string("kind", e.kind)
        object.string("actor", e.actor)
        for (name, value) in [
            ("userId", e.userID), ("reason", e.reason), ("email", e.email), ("ip", e.ip), ("userAgent", e.userAgent),
            ("sessionId", e.sessionID),
        ] where !value.isEmpty {
            object.string(name, value)
        }
        if !e.detailJSON.isEmpty { object.raw("detail", Array(e.detailJSON.utf8)) }
        return String(decoding: object.finish(), as: UTF8.self)
    }

    /// The entry as one line for a person: time, source, kind, then `name=value` for each field set.
    public static func textLine(_ entry: Entry) -> String {
        let e = entry.event
        var words = [timestamp(e.occurredAt), entry.source.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0), e.kind]
        for (name, value) in [
            ("user", e.userID), ("actor", e.actor), ("reason", e.reason), ("email", e.email), ("ip", e.ip), ("session", e.sessionID),
            ("detail", e.detailJSON), ("agent", e.userAgent),
        ] where !value.isEmpty {
            words.append("\(name)=\(value.contains(" ") ? "\"\(value)\"" : value)")
        }
        return words.joined(separator: "  ")
    }

    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}

/// The two audit logs read straight from the database files, read-only (the services write them;
/// SQLite's WAL lets a reader in beside them).
struct AuditFiles: Sendable {
    let identity: DatabaseQueue
    let token: DatabaseQueue

    init(dataDir: String) throws {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(5)
        func open(_ name: String) throws -> DatabaseQueue {
            let path = URL(fileURLWithPath: dataDir).appendingPathComponent(name).path
            guard FileManager.default.fileExists(atPath: path) else {
                throw ConfigError(message: "--data-dir: no \(name) at \(path); start the roles (or gatehouse serve) once first")
            }
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            guard try queue.read({ try AuditLogTable.isCurrent(in: $0) }) else {
                throw ConfigError(message: "--data-dir: \(name) at \(path) predates this version; start this version's roles (or gatehouse serve) once first")
            }
            return queue
        }
        identity = try open("identity.sqlite")
        token = try open("token.sqlite")
    }

    func list(_ source: AuditReader.Source, _ request: ListAuditRequest) throws -> ListAuditResponse {
        try (source == .identity ? identity : token).read { db in try AuditLogTable.page(request, in: db) }
    }
}
