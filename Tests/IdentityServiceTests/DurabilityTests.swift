import Foundation
import IdentityCore
import IdentityService
import Testing

/// A write acknowledged to a caller survives `kill -9`: a child process inserts users and prints
/// each id after its insert returned; we kill it mid-stream and find every printed id.
@Suite struct DurabilityTests {
    /// The built `identity-crash-writer`, next to the test bundle in the build products directory.
    static func crashWriterURL() throws -> URL {
        var candidates: [URL] = []
        for bundle in Bundle.allBundles + [Bundle.main] {
            var dir = bundle.bundleURL
            for _ in 0..<4 {
                candidates.append(dir.appendingPathComponent("identity-crash-writer"))
                dir = dir.deletingLastPathComponent()
            }
        }
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(packageRoot.appendingPathComponent(".build/debug/identity-crash-writer"))
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) { return found }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "identity-crash-writer"])
    }

    @Test func acknowledgedInsertsSurviveKill9() async throws {
        let dir = try TempDirectory()
        defer { dir.cleanup() }
        let process = Process()
        process.executableURL = try Self.crashWriterURL()
        process.arguments = [dir.databasePath]
        let output = Pipe()
        process.standardOutput = output
        try process.run()

        // Read acknowledged ids until we have enough, then kill without warning.
        let ids: [String] = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                var buffer = Data()
                var lines: [String] = []
                let handle = output.fileHandleForReading
                while lines.count < 300 {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    buffer.append(chunk)
                    while let newline = buffer.firstIndex(of: 0x0A) {
                        lines.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                        buffer.removeSubrange(buffer.startIndex...newline)
                    }
                }
                kill(process.processIdentifier, SIGKILL)
                // Ids printed between our last read and the kill were acknowledged too.
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    buffer.append(chunk)
                }
                while let newline = buffer.firstIndex(of: 0x0A) {
                    lines.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
                process.waitUntilExit()
                continuation.resume(returning: lines)
            }
        }
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
