import Foundation
import GatehouseSupport
import GatehouseTestSupport
import GRDB
import Testing
@testable import GatehouseApp

@Suite("Backup and restore (in process)")
struct BackupTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("gh-backup-\(UUID().uuidString)")
    var dataDir: URL { root.appendingPathComponent("data") }

    /// A WAL database like the services', with `rows` rows left in the WAL (the pool stays open).
    func makeDatabase(_ name: String, rows: Int) throws -> DatabasePool {
        try FileManager.default.createDirectory(at: dataDir, withIntermediateDirectories: true)
        let pool = try DatabasePool(path: dataDir.appendingPathComponent(name).path)
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, secret TEXT NOT NULL)")
            for i in 0..<rows { try db.execute(sql: "INSERT INTO t (id, secret) VALUES (?, ?)", arguments: [i, "row \(i)"]) }
        }
        return pool
    }

    func count(_ path: String) throws -> Int {
        var config = Configuration()
        config.readonly = true
        return try DatabaseQueue(path: path, configuration: config).read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") ?? -1 }
    }

    func journalMode(_ path: String) throws -> String? {
        try DatabaseQueue(path: path).read { try String.fetchOne($0, sql: "PRAGMA journal_mode") }
    }

    func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    @Test("copies each database while a writer holds it open: every committed row, integrity ok, one 0600 file")
    func backupWhileOpen() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let identity = try makeDatabase("identity.sqlite", rows: 500)
        let token = try makeDatabase("token.sqlite", rows: 7)
        #expect(FileManager.default.fileExists(atPath: dataDir.appendingPathComponent("identity.sqlite-wal").path))
        // Keep writing while the backup runs.
        let writer = Task.detached {
            var i = 10_000
            while !Task.isCancelled {
                let id = i
                try? await identity.write { db in try db.execute(sql: "INSERT INTO t (id, secret) VALUES (?, 'later')", arguments: [id]) }
                i += 1
            }
        }
        let out = root.appendingPathComponent("out")
        let reports = try DatabaseBackup.backup(dataDir: dataDir, to: out)
        writer.cancel()
        _ = await writer.value
        #expect(reports.map(\.name) == ["identity.sqlite", "token.sqlite"])
        for report in reports {
            #expect(report.pages > 0 && report.bytes == report.pages * 4096)
            #expect(try mode(report.path) == 0o600)
        }
        #expect(try mode(out.path) == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out.path).sorted() == ["identity.sqlite", "token.sqlite"])
        #expect(try count(out.appendingPathComponent("identity.sqlite").path) >= 500)
        #expect(try count(out.appendingPathComponent("token.sqlite").path) == 7)
        #expect(try journalMode(out.appendingPathComponent("identity.sqlite").path) == "delete")
        try identity.close()
        try token.close()
    }

    @Test("refuses an empty data folder and an output folder that already holds the files")
    func refusals() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: dataDir, withIntermediateDirectories: true)
        #expect(throws: DatabaseBackup.Failure.self) { try DatabaseBackup.backup(dataDir: dataDir, to: root.appendingPathComponent("out")) }
        let pool = try makeDatabase("token.sqlite", rows: 3)
        let out = root.appendingPathComponent("out")
        #expect(try DatabaseBackup.backup(dataDir: dataDir, to: out).count == 1)
        let before = try Data(contentsOf: out.appendingPathComponent("token.sqlite"))
        do {
            _ = try DatabaseBackup.backup(dataDir: dataDir, to: out)
            Issue.record("a second backup into the same folder was not refused")
        } catch let failure as DatabaseBackup.Failure {
            #expect(failure.message.contains("already exists"))
        }
        #expect(try Data(contentsOf: out.appendingPathComponent("token.sqlite")) == before)
        try pool.close()
    }

    @Test("restore replaces the databases, drops stale -wal/-shm, keeps the old files aside, refuses a bad backup")
    func restore() throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let pool = try makeDatabase("identity.sqlite", rows: 10)
        let out = root.appendingPathComponent("out")
        _ = try DatabaseBackup.backup(dataDir: dataDir, to: out)
        try pool.write { db in try db.execute(sql: "DELETE FROM t") }
        try pool.close()
        let target = dataDir.appendingPathComponent("identity.sqlite").path
        #expect(try count(target) == 0)
        // A stale -wal (e.g. from a copied-in data folder) must not be replayed onto the restored file.
        try Data("stale".utf8).write(to: URL(fileURLWithPath: target + "-wal"))
        let reports = try DatabaseBackup.restore(from: out, dataDir: dataDir, clock: .fixed(Date(timeIntervalSince1970: 0)))
        #expect(reports.map(\.name) == ["identity.sqlite"])
        #expect(!FileManager.default.fileExists(atPath: target + "-wal"))
        #expect(try count(target) == 10)
        #expect(try mode(target) == 0o600)
        let aside = dataDir.appendingPathComponent("backups/before-restore-19700101T000000Z")
        #expect(try FileManager.default.contentsOfDirectory(atPath: aside.path).sorted() == ["identity.sqlite", "identity.sqlite-wal"])
        #expect(!DatabaseBackup.isInUse(target))

        let bad = root.appendingPathComponent("bad")
        try FileManager.default.createDirectory(at: bad, withIntermediateDirectories: true)
        try Data(repeating: 0x41, count: 8192).write(to: bad.appendingPathComponent("identity.sqlite"))
        #expect(throws: DatabaseBackup.Failure.self) { try DatabaseBackup.restore(from: bad, dataDir: dataDir) }
        #expect(try count(target) == 10)
        #expect(throws: DatabaseBackup.Failure.self) { try DatabaseBackup.restore(from: root.appendingPathComponent("nothing"), dataDir: dataDir) }
    }

    @Test("a backup folder is named after the UTC time its clock reads")
    func outputFolderName() {
        let folder = DatabaseBackup.defaultOutputDirectory(dataDir: URL(fileURLWithPath: "/data"), clock: ManualClock().wallClock)
        #expect(folder.path == "/data/backups/20270115T080000Z")
    }
}
