import GatehouseTestSupport
import Foundation
@testable import SQLiteStores
import IdentityPorts
import IdentityCore
import IdentityService
import Testing

/// A write acknowledged to a caller survives `kill -9`: a child process inserts users and prints
/// each id after its insert returned; we kill it mid-stream and find every printed id.
@Suite struct DurabilityTests {
    @Test func acknowledgedInsertsSurviveKill9() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-tests")
        defer { dir.remove() }
        // Read acknowledged ids until we have enough, then kill without warning.
        let (ids, process) = try await runUntilLinesThenKill(
            try BuiltProducts.executable(named: "identity-crash-writer"), [dir.databasePath], count: 300)
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(process.terminationStatus == SIGKILL)
        #expect(ids.count >= 300)

        let reopened = try await SQLiteUserStore.open(path: dir.databasePath)
        try await reopened.migrate()
        var missing: [String] = []
        for id in ids where try await reopened.user(id: UserID(id)) == nil { missing.append(id) }
        #expect(missing.isEmpty, "acknowledged but lost: \(missing.prefix(5))")
        #expect(try await reopened.count() >= ids.count)
    }
}
