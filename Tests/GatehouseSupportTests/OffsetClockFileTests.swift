import Foundation
import GatehouseSupport
import Testing

@Suite struct OffsetClockFileTests {
    @Test("two mappings of one file share the offset; the clock is the system time plus it")
    func sharedOffset() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("clock-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try OffsetClockFile(path: path)
        let reader = try OffsetClockFile(path: path)
        #expect(reader.offset == .zero)
        writer.advance(by: .seconds(3600))
        writer.advance(by: .milliseconds(1500))
        #expect(reader.offset == .milliseconds(3_601_500))
        let shifted = reader.clock.now.timeIntervalSince(Date())
        #expect(shifted > 3601 && shifted < 3602.5)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
    }
}
