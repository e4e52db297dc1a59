import ArgumentParser
import Foundation
import GatehouseApp

/// Reads the data folder from the configuration (GATEHOUSE_DATA_DIR, overridden by --data-dir).
private func dataDirectory(_ options: [String]) throws -> URL {
    do {
        let config = try Config(arguments: options)
        return URL(fileURLWithPath: try config.required(ConfigTable.dataDir))
    } catch let error as ConfigError {
        throw ValidationError(error.message)
    }
}

/// Prints `gatehouse COMMAND: error: MESSAGE` and gives the exit code 1.
func fail(_ command: String, _ message: String) -> ExitCode {
    failed("gatehouse \(command): error: \(message)")
}

/// Writes `line` to standard error and gives the exit code 1: `throw failed("error: …")`.
func failed(_ line: String) -> ExitCode {
    FileHandle.standardError.write(Data("\(line)\n".utf8))
    return ExitCode(1)
}

struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write a consistent copy of identity.sqlite and token.sqlite while the services run.",
        discussion: """
            Uses SQLite's online backup API on a read-only connection (no migrations run), checks each \
            copy with PRAGMA integrity_check, and writes it with mode 0600. Prints one line per file: \
            path, bytes, pages. Restore with `gatehouse restore --from DIR` after stopping the services.
            """)
    @Option(help: "Folder for the copies (default: <data-dir>/backups/<UTC timestamp>). Must not already hold identity.sqlite or token.sqlite.")
    var out: String?
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --data-dir /data.") var options: [String] = []

    func run() throws {
        let dataDir = try dataDirectory(options)
        let outDir = out.map { URL(fileURLWithPath: $0) } ?? DatabaseBackup.defaultOutputDirectory(dataDir: dataDir)
        do {
            for file in try DatabaseBackup.backup(dataDir: dataDir, to: outDir) {
                print("\(file.path) \(file.bytes) bytes \(file.pages) pages")
            }
        } catch {
            throw fail("backup", "\(error)")
        }
        FileHandle.standardError.write(Data("note: the key-encryption key (\(KeyEncryptionKey.defaultFileName) in the data folder, or GATEHOUSE_KEY_ENCRYPTION_KEY_FILE) is not in the backup, by design: keep a copy of it apart; a restored token.sqlite needs it\n".utf8))
    }
}

struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put the databases of a backup folder in place in the data folder (services stopped).",
        discussion: """
            Refuses while a service has the target database open. Checks each backup with PRAGMA \
            integrity_check first; the files it replaces (with their -wal) are moved to \
            <data-dir>/backups/before-restore-<UTC timestamp>/. Migrations run when the services start.
            """)
    @Option(help: "The backup folder (as written by `gatehouse backup`).")
    var from: String
    @Argument(parsing: .allUnrecognized, help: "Configuration flags, e.g. --data-dir /data.") var options: [String] = []

    func run() throws {
        let dataDir = try dataDirectory(options)
        do {
            for file in try DatabaseBackup.restore(from: URL(fileURLWithPath: from), dataDir: dataDir) {
                print("\(file.path) \(file.bytes) bytes \(file.pages) pages")
            }
        } catch {
            throw fail("restore", "\(error)")
        }
    }
}
