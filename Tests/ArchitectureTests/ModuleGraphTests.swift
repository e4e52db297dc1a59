import Foundation
import GatehouseTestSupport
import Testing

/// Reads `Package.swift`'s target graph and checks every arrow between our targets against the
/// list in ARCHITECTURE.md.
@Suite("Module graph")
struct ModuleGraphTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test("every dependency between our targets is one ARCHITECTURE.md allows, and every target is listed")
    func arrowsPointWhereAllowed() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let architecture = try String(contentsOf: Self.root.appendingPathComponent("ARCHITECTURE.md"), encoding: .utf8)
        let targets = try PackageGraph.targets(in: manifest)
        let allowed = try PackageGraph.allowedArrows(in: architecture)
        #expect(targets.count >= 20, "Package.swift was not read: \(targets.map(\.name))")
        var problems: [String] = []
        for target in targets where !target.isTest {
            guard let permitted = allowed[target.name] else {
                problems.append("\(target.name) is not listed in ARCHITECTURE.md")
                continue
            }
            for dependency in target.dependencies where !permitted.contains(dependency) {
                problems.append("\(target.name) → \(dependency) is not an allowed arrow")
            }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test("every target of ours is drawn in the map and has its row in the table of ARCHITECTURE.md")
    func everyModuleIsDrawn() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let architecture = try String(contentsOf: Self.root.appendingPathComponent("ARCHITECTURE.md"), encoding: .utf8)
        let targets = try PackageGraph.targets(in: manifest).filter { !$0.isTest }
        let mapStart = try #require(architecture.range(of: "```\nedges"))
        let mapEnd = try #require(architecture.range(of: "```", range: mapStart.upperBound..<architecture.endIndex))
        let map = architecture[mapStart.upperBound..<mapEnd.lowerBound]
        let rows = architecture.split(separator: "\n").filter { $0.hasPrefix("| `") }.map { $0.split(separator: "|")[0] }
        var problems: [String] = []
        for target in targets {
            let pattern = "(^|[^A-Za-z0-9_-])" + NSRegularExpression.escapedPattern(for: target.name) + "($|[^A-Za-z0-9_-])"
            if map.range(of: pattern, options: .regularExpression) == nil { problems.append("\(target.name) is not in the map") }
            if !rows.contains(where: { $0.contains("`\(target.name)`") }) { problems.append("\(target.name) has no row in the table") }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test("only test targets depend on GatehouseTestSupport: production holds no fakes")
    func testSupportOnlyInTests() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let targets = try PackageGraph.targets(in: manifest)
        #expect(targets.contains { $0.name == "GatehouseTestSupport" && !$0.isTest })
        let production = targets.filter { !$0.isTest && $0.dependencies.contains("GatehouseTestSupport") }.map(\.name)
        #expect(production.isEmpty, "production targets depending on GatehouseTestSupport: \(production)")
    }

    @Test("the tools live in Tools/, one folder each, and no server target depends on one")
    func toolsApart() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let targets = try PackageGraph.targets(in: manifest)
        let tools = Set(targets.filter(\.isTool).map(\.name))
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Tools").path)
            .filter { !$0.hasPrefix(".") }
        #expect(tools.contains("gatehouse-load") && tools.contains("LoadGenerator"), "no tool read from Package.swift: \(tools)")
        #expect(
            Set(folders.map { "Tools/\($0)" }) == Set(targets.compactMap(\.path).filter { $0.hasPrefix("Tools/") }),
            "Tools/ holds \(folders.sorted()), Package.swift names \(targets.compactMap(\.path).sorted())")
        var problems: [String] = []
        for target in targets where !target.isTest && !target.isTool {
            for dependency in target.dependencies where tools.contains(dependency) {
                problems.append("\(target.name) → \(dependency): a server target depends on a tool")
            }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test("the test process runs a bounded number of tests at once (CTestSupport), unless the caller chose")
    func testParallelismIsBounded() {
        #expect(TestParallelism.width > 0)
    }

    @Test("the reader finds arrows, products excluded, and flags one the list lacks")
    func readerWorks() throws {
        let manifest = """
            .target(name: "A", dependencies: ["B", .product(name: "GRDB", package: "GRDB.swift")]),
            .target(
                name: "B",
                swiftSettings: swiftSettings
            ),
            .testTarget(name: "ATests", dependencies: ["A"]),
            .executableTarget(name: "a-tool", dependencies: ["A"], path: "Tools/a-tool"),
            """
        let targets = try PackageGraph.targets(in: manifest)
        #expect(targets.map(\.name) == ["A", "B", "ATests", "a-tool"])
        #expect(targets[0].dependencies == ["B"])
        #expect(targets[1].dependencies == [])
        #expect(targets[2].isTest)
        #expect(targets.map(\.isTool) == [false, false, false, true])
        #expect(targets[3].dependencies == ["A"] && targets[3].path == "Tools/a-tool")
        let allowed = try PackageGraph.allowedArrows(in: "<!-- allowed-dependencies -->\n- A: C\n- B:\n<!-- /allowed-dependencies -->")
        #expect(allowed["A"] == ["C"])
        #expect(allowed["B"] == [])
        #expect(!(allowed["A"] ?? []).contains("B"))
    }
}

/// A deliberately small reader of our `Package.swift`: each `.target`, `.executableTarget`,
/// `.systemLibrary` or `.testTarget` call, its `name:`, its `path:` if any, and the quoted names
/// in its `dependencies:` list (`.product(…)` entries are external and skipped).
enum PackageGraph {
    struct Target {
        var name: String
        var dependencies: [String]
        var isTest: Bool
        /// The folder named by `path:`; nil for the default (`Sources/<name>`, `Tests/<name>`).
        var path: String? = nil

        /// A tool (load generator, benchmark peer, crash writer): its folder is under `Tools/`.
        var isTool: Bool { path?.hasPrefix("Tools/") ?? false }
    }

    struct ReadError: Error, CustomStringConvertible {
        var description: String
    }

    static func targets(in manifest: String) throws -> [Target] {
        let text = Array(manifest.utf8)
        var result: [Target] = []
        let kinds = [".target(", ".executableTarget(", ".systemLibrary(", ".testTarget("]
        var i = 0
        while i < text.count {
            guard let kind = kinds.first(where: { starts(text, at: i, with: $0) }) else {
                i += 1
                continue
            }
            let open = i + kind.utf8.count - 1
            let close = try matching(text, open: open)
            let call = String(decoding: text[(open + 1)..<close], as: UTF8.self)
            guard let name = firstQuoted(after: "name:", in: call) else { throw ReadError(description: "a target without a name: \(call)") }
            var dependencies: [String] = []
            if let range = call.range(of: "dependencies:") {
                let rest = Array(call[range.upperBound...].utf8)
                guard let start = rest.firstIndex(of: UInt8(ascii: "[")) else { throw ReadError(description: "\(name): dependencies without a list") }
                let end = try matching(rest, open: start)
                dependencies = topLevelQuoted(Array(rest[(start + 1)..<end]))
            }
            let path = firstQuoted(after: "path:", in: call)
            result.append(Target(name: name, dependencies: dependencies, isTest: kind == ".testTarget(", path: path))
            i = close + 1
        }
        return result
    }

    /// `target: A, B` lines between the `allowed-dependencies` markers.
    static func allowedArrows(in markdown: String) throws -> [String: Set<String>] {
        guard let start = markdown.range(of: "<!-- allowed-dependencies -->"),
            let end = markdown.range(of: "<!-- /allowed-dependencies -->", range: start.upperBound..<markdown.endIndex)
        else { throw ReadError(description: "ARCHITECTURE.md has no allowed-dependencies block") }
        var result: [String: Set<String>] = [:]
        for line in markdown[start.upperBound..<end.lowerBound].split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("- "), let colon = trimmed.firstIndex(of: ":") else { continue }
            let name = trimmed[trimmed.index(trimmed.startIndex, offsetBy: 2)..<colon].trimmingCharacters(in: .whitespaces)
            let list = trimmed[trimmed.index(after: colon)...].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            result[name] = Set(list.filter { !$0.isEmpty })
        }
        return result
    }

    static func starts(_ text: [UInt8], at i: Int, with prefix: String) -> Bool {
        let p = Array(prefix.utf8)
        return i + p.count <= text.count && Array(text[i..<(i + p.count)]) == p
    }

    /// The index of the bracket closing the one at `open` (strings skipped).
    static func matching(_ text: [UInt8], open: Int) throws -> Int {
        var depth = 0
        var inString = false
        var i = open
        while i < text.count {
            let c = text[i]
            if inString {
                if c == UInt8(ascii: "\\") { i += 1 } else if c == UInt8(ascii: "\"") { inString = false }
            } else if c == UInt8(ascii: "\"") {
                inString = true
            } else if c == UInt8(ascii: "(") || c == UInt8(ascii: "[") {
                depth += 1
            } else if c == UInt8(ascii: ")") || c == UInt8(ascii: "]") {
                depth -= 1
                if depth == 0 { return i }
            }
            i += 1
        }
        throw ReadError(description: "unbalanced brackets in Package.swift")
    }

    static func firstQuoted(after label: String, in text: String) -> String? {
        guard let range = text.range(of: label) else { return nil }
        let rest = text[range.upperBound...]
        guard let q1 = rest.firstIndex(of: "\""), let q2 = rest[rest.index(after: q1)...].firstIndex(of: "\"") else { return nil }
        return String(rest[rest.index(after: q1)..<q2])
    }

    /// Quoted strings at depth 0 of a list: plain target names, not those inside `.product(…)`.
    static func topLevelQuoted(_ text: [UInt8]) -> [String] {
        var result: [String] = []
        var depth = 0
        var i = 0
        while i < text.count {
            let c = text[i]
            if c == UInt8(ascii: "(") || c == UInt8(ascii: "[") { depth += 1 }
            if c == UInt8(ascii: ")") || c == UInt8(ascii: "]") { depth -= 1 }
            if c == UInt8(ascii: "\"") {
                var j = i + 1
                while j < text.count, text[j] != UInt8(ascii: "\"") { j += 1 }
                if depth == 0 { result.append(String(decoding: text[(i + 1)..<j], as: UTF8.self)) }
                i = j
            }
            i += 1
        }
        return result
    }
}
