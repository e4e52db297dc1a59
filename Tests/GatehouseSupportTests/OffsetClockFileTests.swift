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

    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("clock-\(UUID().uuidString)").path
    }

    @Test("an existing file others may write (0666, 0620) is refused, unchanged; a 0600 file of ours is mapped")
    func refusesFilesOthersCanWrite() throws {
        for mode in [0o666, 0o620, 0o602] {
            let path = temporaryPath()
            defer { try? FileManager.default.removeItem(atPath: path) }
            #expect(FileManager.default.createFile(atPath: path, contents: Data()))
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
            do {
                _ = try OffsetClockFile(path: path)
                Issue.record("mode \(String(mode, radix: 8)) accepted")
            } catch let error as OffsetClockFileError {
                #expect(error.refused != nil)
                #expect(error.description.contains("writable by its group or others"), "\(error)")
            }
            #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 0)  // not grown to 8 bytes
        }
        let path = temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(FileManager.default.createFile(atPath: path, contents: Data(count: 8)))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let clock = try OffsetClockFile(path: path)
        clock.advance(by: .seconds(5))
        #expect(try OffsetClockFile(path: path).offset == .seconds(5))
    }

    @Test("a symbolic link and a directory are refused")
    func refusesLinksAndDirectories() throws {
        let target = temporaryPath(), link = temporaryPath(), directory = temporaryPath()
        defer { for path in [target, link, directory] { try? FileManager.default.removeItem(atPath: path) } }
        _ = try OffsetClockFile(path: target)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(throws: OffsetClockFileError.self) { try OffsetClockFile(path: link) }
        do { _ = try OffsetClockFile(path: link) } catch let error as OffsetClockFileError {
            #expect(error.description.contains("symbolic link"), "\(error)")
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        #expect(throws: OffsetClockFileError.self) { try OffsetClockFile(path: directory) }
    }
}
