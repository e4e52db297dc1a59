import Foundation
import Testing
@testable import GatehouseApp

@Suite("deploy/README.md")
struct DeployReadmeTests {
    @Test("the operator table lists every configuration key with its default and whether it is secret")
    func table() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("deploy/README.md"), encoding: .utf8)
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| `GATEHOUSE_") }
        for key in ConfigTable.all {
            let defaultText = key.defaultValue.map { $0.isEmpty ? "(empty)" : "`\($0)`" } ?? "—"
            let expected = "| `\(key.env)` | \(defaultText) | \(key.secret ? "yes" : "no") | \(key.roles) |"
            #expect(rows.contains { $0.hasPrefix(expected) }, "deploy/README.md lacks the row \(expected)")
        }
    }
}
