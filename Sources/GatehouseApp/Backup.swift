import Foundation
import GatehouseSupport
import GRDB
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Online backups and restores of the SQLite files in the data folder (`gatehouse backup`,
/// `gatehouse restore`).
///
/// A backup copies each database with SQLite's online backup API in one step, inside one read
/// transaction of a read-only connection: in WAL mode readers never block the writer, so the
/// services keep serving, and the copy is the database as of one committed transaction (every
/// write acknowledged before the backup began is in it). No migration runs. The copy is then
/// switched to `journal_mode = DELETE`, so it is one self-contained file (no `-wal`/`-shm`),
/// checked with `PRAGMA integrity_check`, and fsynced; it is created with mode 0600 (the files
/// hold password hashes, refresh-token hashes and signing keys).
public enum DatabaseBackup {
    /// The files a data folder may hold.
    public static let databaseNames = ["identity.sqlite", "token.sqlite"]

    /// One file written (or restored).
    public struct FileReport: Sendable, Equatable {
        /// The file's name, e.g. `identity.sqlite`.
        public let name: String
        /// Where the file was written.
        public let path: String
        /// The file's size in bytes.
        public let bytes: Int
        /// The database's page count.
        public let pages: Int
    }

    /// Why a backup or restore stopped, as one line for the operator.
    public struct Failure: Error, CustomStringConvertible {
        /// The reason, naming the file or folder at fault.
        public let message: String
        /// A failure with `message`.
        public init(_ message: String) { self.message = message }
        /// The message.
        public var description: String { message }
    }

    /// `<data-dir>/backups/<UTC timestamp>`, e.g. `backups/20260123T020304Z`, the time read from `clock`.
    public static func defaultOutputDirectory(dataDir: URL, clock: WallClock = .system) -> URL {
        dataDir.appendingPathComponent("backups").appendingPathComponent(timestamp(clock.now))
    }

    /// `date` in UTC in ISO 8601's basic format, `20260123T020304Z`.
    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(dateSeparator: .omitted, timeSeparator: .omitted))
    }

    /// Copies every database of `dataDir` into `outDir` (created with mode 0700 if missing).
    /// Fails when the data folder holds no database, when `outDir` already holds a file of the
    /// same name, or when a copy does not pass `integrity_check` (the bad copy is removed).
    public static func backup(dataDir: URL, to outDir: URL, busyTimeout: TimeInterval = 10) throws -> [FileReport] {
        let fm = FileManager.default
        let present = databaseNames.filter { fm.fileExists(atPath: dataDir.appendingPathComponent($0).path) }
        guard !present.isEmpty else {
            throw Failure("no database in \(dataDir.path) (expected \(databaseNames.joined(separator: " or "))); check GATEHOUSE_DATA_DIR / --data-dir")
        }
        for name in present {
            for suffix in ["", "-journal", "-wal", "-shm"] where fm.fileExists(atPath: outDir.appendingPathComponent(name + suffix).path) {
                throw Failure("\(outDir.appendingPathComponent(name + suffix).path) already exists; choose another --out folder")
            }
        }
        try fm.createDirectory(at: outDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var reports: [FileReport] = []
        for name in present {
            reports.append(try backupOne(source: dataDir.appendingPathComponent(name), destination: outDir.appendingPathComponent(name), busyTimeout: busyTimeout))
        }
        fsyncPath(outDir.path)
        return reports
    }

    static func backupOne(source: URL, destination: URL, busyTimeout: TimeInterval) throws -> FileReport {
        // Create the file first, exclusively and private, so the copy is never readable by others
        // and a file that appeared since the check is not overwritten.
        let fd = open(destination.path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw Failure("cannot create \(destination.path): \(String(cString: strerror(errno)))")
        }
        fchmod(fd, 0o600)
        close(fd)
        do {
            var sourceConfig = Configuration()
            sourceConfig.readonly = true
            sourceConfig.busyMode = .timeout(busyTimeout)
            sourceConfig.label = "backup-source"
            let sourceQueue = try DatabaseQueue(path: source.path, configuration: sourceConfig)
            var destConfig = Configuration()
            destConfig.busyMode = .timeout(busyTimeout)
            destConfig.label = "backup-destination"
            let destQueue = try DatabaseQueue(path: destination.path, configuration: destConfig)
            try sourceQueue.backup(to: destQueue)
            try sourceQueue.close()
            let pages = try destQueue.writeWithoutTransaction { db -> Int in
                // The copied header says WAL; make the copy one self-contained file.
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE")
                try checkIntegrity(db, path: destination.path)
                return try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            }
            try destQueue.close()
            for suffix in ["-journal", "-wal", "-shm"] {
                try? FileManager.default.removeItem(atPath: destination.path + suffix)
            }
            chmod(destination.path, 0o600)
            fsyncPath(destination.path)
            return FileReport(name: destination.lastPathComponent, path: destination.path, bytes: fileSize(destination.path), pages: pages)
        } catch {
            for suffix in ["", "-journal", "-wal", "-shm"] {
                try? FileManager.default.removeItem(atPath: destination.path + suffix)
            }
            if let failure = error as? Failure { throw failure }
            throw Failure("backing up \(source.path) failed: \(error)")
        }
    }

    static func checkIntegrity(_ db: Database, path: String) throws {
        let rows = try String.fetchAll(db, sql: "PRAGMA integrity_check")
        guard rows == ["ok"] else {
            throw Failure("integrity_check of \(path) failed: \(rows.prefix(5).joined(separator: "; "))")
        }
    }

    // MARK: Restore

    /// Whether a process other than this one has the database open (in WAL mode). Every SQLite
    /// connection to a WAL database holds a shared POSIX lock on byte 128 of the `-shm` file (the
    /// "dead man switch"); a running service keeps its connections open, so this finds it even
    /// when it is idle. (POSIX locks of this process are not visible to it.)
    public static func isInUse(_ databasePath: String) -> Bool {
        let shm = databasePath + "-shm"
        let fd = open(shm, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 128
        lock.l_len = 1
        guard fcntl(fd, F_GETLK, &lock) == 0 else { return false }
        return lock.l_type != Int16(F_UNLCK)
    }

    /// Puts the databases of the backup folder `from` in place in `dataDir`. Refuses when a
    /// target database is open in another process (stop the services first), when `from` holds
    /// no database, or when a backup file fails `integrity_check`. The files it replaces (with
    /// their `-wal`) are moved to `<data-dir>/backups/before-restore-<UTC timestamp>/`, not deleted.
    /// Migrations run when the services next start. The folder's timestamp is read from `clock`.
    public static func restore(from: URL, dataDir: URL, clock: WallClock = .system) throws -> [FileReport] {
        let fm = FileManager.default
        let present = databaseNames.filter { fm.fileExists(atPath: from.appendingPathComponent($0).path) }
        guard !present.isEmpty else {
            throw Failure("no backup in \(from.path) (expected \(databaseNames.joined(separator: " or ")))")
        }
        for name in present where isInUse(dataDir.appendingPathComponent(name).path) {
            throw Failure("\(dataDir.appendingPathComponent(name).path) is open in a running process; stop the services before restoring")
        }
        // Check every backup before touching the data folder.
        for name in present {
            let path = from.appendingPathComponent(name).path
            var config = Configuration()
            config.readonly = true
            do {
                let queue = try DatabaseQueue(path: path, configuration: config)
                try queue.read { db in try checkIntegrity(db, path: path) }
                try queue.close()
            } catch let failure as Failure { throw failure } catch {
                throw Failure("\(path) is not a readable SQLite database: \(error)")
            }
        }
        try fm.createDirectory(at: dataDir, withIntermediateDirectories: true)
        let aside = dataDir.appendingPathComponent("backups").appendingPathComponent("before-restore-\(timestamp(clock.now))")
        var reports: [FileReport] = []
        for name in present {
            let source = from.appendingPathComponent(name)
            let target = dataDir.appendingPathComponent(name)
            let temporary = dataDir.appendingPathComponent(name + ".restoring")
            try? fm.removeItem(at: temporary)
            try copyPrivately(from: source.path, to: temporary.path)
            for suffix in ["", "-wal", "-shm", "-journal"] where fm.fileExists(atPath: target.path + suffix) {
                if suffix == "-shm" || suffix == "-journal" {
                    try fm.removeItem(atPath: target.path + suffix)
                } else {
                    try fm.createDirectory(at: aside, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                    try fm.moveItem(atPath: target.path + suffix, toPath: aside.appendingPathComponent(name + suffix).path)
                }
            }
            guard rename(temporary.path, target.path) == 0 else {
                throw Failure("cannot move \(temporary.path) into place: \(String(cString: strerror(errno)))")
            }
            var config = Configuration()
            config.readonly = true
            let pages = try DatabaseQueue(path: target.path, configuration: config).read { db in
                try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            }
            reports.append(FileReport(name: name, path: target.path, bytes: fileSize(target.path), pages: pages))
        }
        fsyncPath(dataDir.path)
        return reports
    }

    static func copyPrivately(from source: String, to destination: String) throws {
        guard let data = FileManager.default.contents(atPath: source) else {
            throw Failure("cannot read \(source)")
        }
        let fd = open(destination, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure("cannot create \(destination): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        fchmod(fd, 0o600)
        let written = data.withUnsafeBytes { buffer -> Int in
            var offset = 0
            while offset < buffer.count {
                let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n <= 0 { return -1 }
                offset += n
            }
            return offset
        }
        guard written == data.count, fsync(fd) == 0 else {
            throw Failure("cannot write \(destination): \(String(cString: strerror(errno)))")
        }
    }

    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
    }

    static func fsyncPath(_ path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }
}
