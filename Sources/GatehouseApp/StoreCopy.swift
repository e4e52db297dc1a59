import Foundation
import IdentityPorts
import TokenPorts
import SQLiteStores
import GatehouseSupport
import Logging
import PostgresNIO
import PostgresStores
import PostgresSupport
import IdentityService
import TokenService

/// `gatehouse store copy`: an existing deployment's token store moved from SQLite into PostgreSQL
/// (issue 24), verified by counts and a sample of refresh tokens.
public enum StoreCopy {
    /// What a copy did.
    public struct Report: Sendable {
        /// The rows copied (equal in both stores).
        public var counts: TokenCopyCounts
        /// Refresh tokens picked at random that found their sessions in the copy.
        public var sampled: Int
        /// The source file.
        public var source: String
        /// The target, without its password.
        public var target: String
    }

    /// Parses `sqlite:DIR` (the data folder holding `token.sqlite`).
    public static func sqliteFolder(_ from: String) throws -> URL {
        guard from.hasPrefix("sqlite:"), from.count > "sqlite:".count else {
            throw TokenCopyError("--from must be sqlite:DIR, the data folder that holds token.sqlite or identity.sqlite (e.g. sqlite:/data), not '\(from)'")
        }
        return URL(fileURLWithPath: String(from.dropFirst("sqlite:".count)))
    }

    /// Copies `DIR/token.sqlite` into the empty PostgreSQL database `url` (migrated first),
    /// checking before the commit that every kind of row has the same count on both sides and that
    /// 100 refresh tokens picked at random find the same session. Refuses while a process has the file open (stop
    /// the token service first) and when the target already holds a token store.
    public static func copyTokens(from folder: URL, to url: String, passwordFile: String?, logger: Logger) async throws -> Report {
        let (target, path, source) = try prepare(
            "token", in: folder, to: url, passwordFile: passwordFile, TokenCopyError.init, open: SQLiteTokenStore.CopySource.init(path:))
        return try await withClient(target, logger: logger) { client in
            let store = PostgresTokenStore(client: client, logger: logger)
            try await store.migrate()
            let checked = try await store.copy(from: source) { !DatabaseBackup.isInUse(path) }
            return Report(counts: checked.counts, sampled: checked.sampled, source: path, target: "\(target)")
        }
    }

    /// What a copy of `service`'s store starts with: the target's settings, and `<service>.sqlite`
    /// in `folder` (refused as `error` while a running process has it open) opened by `open`.
    static func prepare<Source>(
        _ service: String, in folder: URL, to url: String, passwordFile: String?, _ error: (String) -> any Error,
        open: (String) throws -> Source
    ) throws -> (target: PostgresSettings, path: String, source: Source) {
        let target = try settings(url, passwordFile: passwordFile, error)
        let path = folder.appendingPathComponent("\(service).sqlite").path
        try requireStopped(path, service: service, error)
        return (target, path, try open(path))
    }

    /// The target's settings; a bad URL or password file refused as `--to`'s.
    static func settings(_ url: String, passwordFile: String?, _ error: (String) -> any Error) throws -> PostgresSettings {
        do { return try PostgresSettings(url: url, passwordFile: passwordFile, readFile: SecretFiles.contents(atPath:)) } catch let cause {
            throw error("--to: \(cause)")
        }
    }

    /// Refuses a store file a running process has open.
    static func requireStopped(_ path: String, service: String, _ error: (String) -> any Error) throws {
        guard !isInUse(path) else { throw error("\(path) is open in a running process; stop the \(service) service before copying") }
    }

    /// Runs `body` with a client of `target` (two connections, its own log quiet), stopped after.
    static func withClient<T: Sendable>(
        _ target: PostgresSettings, logger: Logger, _ body: (PostgresClient) async throws -> T
    ) async throws -> T {
        var quiet = logger
        quiet.logLevel = .error
        let client = PostgresClient(configuration: try target.clientConfiguration(maximumConnections: 2), backgroundLogger: quiet)
        let running = Task { await client.run() }
        defer { running.cancel() }
        return try await body(client)
    }

    /// What an identity copy wrote.
    public struct IdentityReport: Sendable {
        /// Rows per table, and the sign-ins checked.
        public var copy: PostgresUserStore.CopyReport
        /// Users picked at random that signed in as stored in the copy.
        public var sampled: Int { copy.sampled }
        /// The file copied.
        public var source: String
        /// The database copied into (without its password).
        public var target: String
    }

    /// Whether a running process has the SQLite file at `path` open.
    public static func isInUse(_ path: String) -> Bool { DatabaseBackup.isInUse(path) }

    /// Which stores the folder holds: `token.sqlite`, `identity.sqlite` (or both, for `gatehouse serve`).
    public static func stores(in folder: URL) -> (token: Bool, identity: Bool) {
        let manager = FileManager.default
        return (
            manager.fileExists(atPath: folder.appendingPathComponent("token.sqlite").path),
            manager.fileExists(atPath: folder.appendingPathComponent("identity.sqlite").path)
        )
    }

    /// Copies the stopped identity service's `identity.sqlite` in `folder` into the empty
    /// PostgreSQL database at `url` (migrated first), checked before the commit.
    public static func copyIdentity(from folder: URL, to url: String, passwordFile: String?, logger: Logger) async throws -> IdentityReport {
        let (target, path, source) = try prepare(
            "identity", in: folder, to: url, passwordFile: passwordFile, IdentityCopyError.init, open: SQLiteUserStore.CopySource.init(path:))
        return try await withClient(target, logger: logger) { client in
            let store = PostgresUserStore(client: client, logger: logger)
            try await store.migrate()
            let report = try await store.copy(from: source) { !DatabaseBackup.isInUse(path) }
            return IdentityReport(copy: report, source: path, target: "\(target)")
        }
    }

    /// Checks, before anything is copied, that each store the folder holds can be copied: its file
    /// is not open in a running process, it is fully migrated, and the database (migrated here)
    /// holds no such store yet. So a copy never moves one store and leaves the other behind.
    public static func checkTargets(folder: URL, to url: String, passwordFile: String?, logger: Logger) async throws {
        let present = stores(in: folder)
        for (name, file, there) in [("identity", "identity.sqlite", present.identity), ("token", "token.sqlite", present.token)] where there {
            try requireStopped(folder.appendingPathComponent(file).path, service: name, IdentityCopyError.init)
        }
        let target = try settings(url, passwordFile: passwordFile, IdentityCopyError.init)
        try await withClient(target, logger: logger) { client in
            if present.identity {
                let source = try SQLiteUserStore.CopySource(path: folder.appendingPathComponent("identity.sqlite").path)
                let store = PostgresUserStore(client: client, logger: logger)
                try await store.migrate()
                if let held = try await store.holdsCopyTarget(tables: try source.tables()) {
                    throw IdentityCopyError("the target database already holds identity data (\(held)): copy into an empty database; nothing was copied")
                }
            }
            if present.token {
                _ = try SQLiteTokenStore.CopySource(path: folder.appendingPathComponent("token.sqlite").path)
                let store = PostgresTokenStore(client: client, logger: logger)
                try await store.migrate()
                if try await store.holdsTokenStore() {
                    throw TokenCopyError("the target database already holds a token store (keys, sessions or a secret): copy into an empty database; nothing was copied")
                }
            }
        }
    }
}
