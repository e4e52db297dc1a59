import Foundation
import Synchronization

/// A real PostgreSQL server for a test (issue 24): Debian's `initdb` and `pg_ctl` in a temporary
/// folder, on a free loopback port, trusting local connections, stopped (immediately) by
/// `stop()`. Run as an unprivileged user when the test runs as root (CI does; PostgreSQL refuses
/// to run as root), through `runuser`.
public final class PostgresServer: @unchecked Sendable {
    /// The server's port on 127.0.0.1.
    public let port: Int
    /// The superuser the tests connect as (no password: trust on loopback).
    public let user = "gatehouse"
    /// The data folder.
    public let directory: URL
    private let bin: URL
    private let runAs: String?

    /// Why a server could not start, with what it printed.
    public struct StartError: Error, CustomStringConvertible {
        /// What failed, with the server's output.
        public let description: String
    }

    /// The newest `/usr/lib/postgresql/<version>/bin`, or nil when PostgreSQL is not installed
    /// (`scripts/setup` installs it).
    public static var binaries: URL? {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        return versions.compactMap(Int.init).max().map { root.appendingPathComponent("\($0)/bin") }
            .flatMap { FileManager.default.fileExists(atPath: $0.appendingPathComponent("initdb").path) ? $0 : nil }
    }

    private init(port: Int, directory: URL, bin: URL, runAs: String?) {
        self.port = port
        self.directory = directory
        self.bin = bin
        self.runAs = runAs
    }

    /// Makes a cluster in a new temporary folder and starts it; throws `StartError` with the
    /// server's output when it does not come up.
    public static func start() async throws -> PostgresServer {
        guard let bin = binaries else {
            throw StartError(description: "PostgreSQL is not installed (/usr/lib/postgresql/<version>/bin/initdb): run scripts/setup")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gh-pg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let runAs: String? = getuid() == 0 ? "nobody" : nil
        if runAs != nil {
            // The cluster's folder must belong to the user that runs the server.
            _ = try await runProcess(URL(fileURLWithPath: "/bin/chown"), ["-R", "nobody:nogroup", directory.path])
        }
        let server = PostgresServer(port: freeLoopbackPort(), directory: directory, bin: bin, runAs: runAs)
        let data = directory.appendingPathComponent("data").path
        let initdb = try await server.run(
            "initdb", ["-D", data, "-U", server.user, "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"])
        guard initdb.status == 0 else { throw StartError(description: "initdb failed: \(initdb.stderr)\(initdb.stdout)") }
        try await server.startCluster()
        return server
    }

    /// Starts the cluster in `directory` (after `initdb`, or after `crash()`).
    private func startCluster() async throws {
        let data = directory.appendingPathComponent("data").path
        let options = "-p \(port) -k \(directory.path) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        let log = directory.appendingPathComponent("server.log").path
        let started = try await run("pg_ctl", ["-D", data, "-o", options, "-l", log, "-w", "-t", "60", "start"])
        guard started.status == 0 else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw StartError(description: "pg_ctl start failed: \(started.stderr)\(started.stdout)\n\(text)")
        }
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`: every connection cut, no checkpoint,
    /// as a crash leaves it), keeping its data for `startAgain()`.
    public func crash() async {
        _ = try? await run("pg_ctl", ["-D", directory.appendingPathComponent("data").path, "-m", "immediate", "stop"])
    }

    /// Starts the server again on the same port and data after `crash()` (crash recovery replays its WAL).
    public func startAgain() async throws {
        try await startCluster()
    }

    /// Creates a database (owned by `user`) and returns its name.
    public func createDatabase(_ name: String = "gh_\(UUID().uuidString.prefix(8).lowercased())") async throws -> String {
        let made = try await run("createdb", ["-h", "127.0.0.1", "-p", "\(port)", "-U", user, name])
        guard made.status == 0 else { throw StartError(description: "createdb failed: \(made.stderr)") }
        return name
    }

    /// `postgres://gatehouse@127.0.0.1:<port>/<database>`.
    public func url(database: String) -> String { "postgres://\(user)@127.0.0.1:\(port)/\(database)" }

    /// Stops the server at once (`pg_ctl stop -m immediate`, as `kill -9` would leave it) and
    /// removes its folder.
    public func stop() async {
        _ = try? await run("pg_ctl", ["-D", directory.appendingPathComponent("data").path, "-m", "immediate", "stop"])
        try? FileManager.default.removeItem(at: directory)
    }

    /// `stop()` without suspending (for the test process's exit).
    public func stopNow() {
        let tool = bin.appendingPathComponent("pg_ctl").path
        let arguments = ["-D", directory.appendingPathComponent("data").path, "-m", "immediate", "stop"]
        if let runAs {
            _ = try? runProcessSync(URL(fileURLWithPath: "/usr/sbin/runuser"), ["-u", runAs, "--", tool] + arguments)
        } else {
            _ = try? runProcessSync(URL(fileURLWithPath: tool), arguments)
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// One server for the whole test process, started by the first caller, a database per
    /// test: starting a cluster costs a second or two of both cores. It is stopped when the
    /// test process exits.
    public static func shared() async throws -> PostgresServer {
        let task = sharedStart.withLock { task in
            if let task { return task }
            let started = Task { () throws -> PostgresServer in
                let server = try await PostgresServer.start()
                sharedServer.withLock { $0 = server }
                atexit { PostgresServer.sharedServer.withLock { $0 }?.stopNow() }
                return server
            }
            task = started
            return started
        }
        return try await task.value
    }

    private static let sharedStart = Mutex<Task<PostgresServer, any Error>?>(nil)
    private static let sharedServer = Mutex<PostgresServer?>(nil)

    /// Runs one of PostgreSQL's programs, as the unprivileged user when the test is root.
    private func run(_ program: String, _ arguments: [String]) async throws -> ProcessResult {
        let tool = bin.appendingPathComponent(program).path
        if let runAs {
            return try await runProcess(URL(fileURLWithPath: "/usr/sbin/runuser"), ["-u", runAs, "--", tool] + arguments, in: directory)
        }
        return try await runProcess(URL(fileURLWithPath: tool), arguments, in: directory)
    }
}
