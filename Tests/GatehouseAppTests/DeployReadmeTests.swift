import Foundation
import Testing
@testable import GatehouseApp

@Suite("deploy/README.md")
struct DeployReadmeTests {
    @Test("the operator table is the one the key table renders: every key with its default, whether it is secret, its roles and meaning")
    func table() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("deploy/README.md"), encoding: .utf8)
        let current = try #require(ConfigReference.current(.compose, in: readme), "deploy/README.md lacks the generated table's markers")
        #expect(current == ConfigReference.table(.compose), "run `swift run gatehouse config reference --write deploy/README.md`")
        for key in ConfigTable.all {
            #expect(current.contains("| `\(key.env)` |"), "deploy/README.md lacks \(key.env)")
        }
    }
}
