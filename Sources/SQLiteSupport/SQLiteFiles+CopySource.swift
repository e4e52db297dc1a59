import Foundation
import GRDB

extension SQLiteFiles {
    /// A stopped `service`'s database at `path`, opened read-only for `gatehouse store copy`;
    /// `makeError` says what is wrong when the file is missing or lacks one of `migrator`'s
    /// migrations (the service of this version must have run on it once).
    public static func openCopySource(
        _ path: String, service: String, migrator: DatabaseMigrator, makeError: (String) -> any Error
    ) throws -> DatabaseQueue {
        guard FileManager.default.fileExists(atPath: path) else { throw makeError("no \(service) database at \(path)") }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "\(service)-copy-source"
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        let applied = try queue.read { db in try migrator.appliedIdentifiers(db) }
        let missing = Set(migrator.migrations).subtracting(applied)
        guard missing.isEmpty else {
            throw makeError(
                "\(path) lacks migrations \(missing.sorted().joined(separator: ", ")): start this version's \(service) service on it once, then stop it and copy")
        }
        return queue
    }
}
