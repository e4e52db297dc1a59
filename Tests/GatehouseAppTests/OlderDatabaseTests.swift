import Foundation
@testable import GatehouseApp
import GatehouseTestSupport
import GRDB
@testable import SQLiteStores
import Testing

/// The commands that read a data folder's files without migrating them (`gatehouse audit
/// --data-dir`, `gatehouse admin keys --data-dir`) on files this version's services have not run
/// on yet, whose columns still have their camelCase names (before the identity store's migration
/// 0015 and the token store's 0006): refused with what to do, read once migrated.
@Suite struct OlderDatabaseTests {
    @Test("audit --data-dir and admin keys --data-dir refuse files of the camelCase schema, saying to start this version once, and read them once it has")
    func olderFilesAreRefused() async throws {
        let dir = try TemporaryDirectory(prefix: "older-database")
        defer { dir.remove() }
        let identity = try DatabaseQueue(path: dir.path("identity.sqlite"))
        try SQLiteUserStore.migrator.migrate(identity, upTo: "0014-apple-tokens")
        let token = try DatabaseQueue(path: dir.path("token.sqlite"))
        try SQLiteTokenStore.migrator.migrate(token, upTo: "0005-key-activation")

        let audit = #expect(throws: ConfigError.self) { _ = try AuditReader(dataDir: dir.path) }
        #expect(audit?.message.contains("identity.sqlite") == true && audit?.message.contains("predates this version") == true, "\(String(describing: audit))")
        let keys = await #expect(throws: ConfigError.self) { _ = try await AdminKeyFile(dataDir: dir.path) }
        #expect(keys?.message.contains("predates this version") == true, "\(String(describing: keys))")

        // The identity file migrated, the token file not yet: the audit reader names the token file.
        try SQLiteUserStore.migrator.migrate(identity)
        let tokenOnly = #expect(throws: ConfigError.self) { _ = try AuditReader(dataDir: dir.path) }
        #expect(tokenOnly?.message.contains("token.sqlite") == true, "\(String(describing: tokenOnly))")
        #expect(try await AdminKeyFile(dataDir: dir.path).list().isEmpty)

        try SQLiteTokenStore.migrator.migrate(token)
        let reader = try AuditReader(dataDir: dir.path)
        var read = 0
        _ = try await reader.read(after: AuditReader.Cursor()) { _ in read += 1 }
        #expect(read == 0)
    }
}
