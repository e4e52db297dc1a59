import Foundation
import Testing

/// Two rules every file under Sources/ and Tools/ keeps: at most 400 lines, and a `///` line on
/// every public declaration saying what it is for.
@Suite("Source rules")
struct SourceRulesTests {
    static let sources = ModuleGraphTests.root.appendingPathComponent("Sources")
    static let tools = ModuleGraphTests.root.appendingPathComponent("Tools")

    /// The Swift files under `folders` (the server's and the tools' by default).
    static func swiftFiles(in folders: [URL] = [SourceRulesTests.sources, SourceRulesTests.tools]) throws -> [URL] {
        var files: [URL] = []
        for folder in folders {
            let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)
            while let url = enumerator?.nextObject() as? URL {
                if url.pathExtension == "swift" { files.append(url) }
            }
        }
        return files.sorted { $0.path < $1.path }
    }

    @Test("no source file is over 400 lines")
    func filesAreShort() throws {
        let files = try Self.swiftFiles()
        #expect(files.count > 100, "Sources/ was not read")
        #expect(files.contains { $0.path.contains("/Tools/LoadGenerator/") }, "Tools/ was not read")
        for file in files {
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).count
            #expect(lines <= 401, "\(file.path) has \(lines) lines")
        }
    }

    @Test("every public declaration has a /// line")
    func publicDeclarationsAreDocumented() throws {
        var missing: [String] = []
        for file in try Self.swiftFiles() {
            let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
            for index in Self.undocumentedPublicDeclarations(lines) {
                missing.append("\(file.path):\(index + 1): \(lines[index].trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(missing.isEmpty, "\(missing.count) undocumented:\n\(missing.prefix(50).joined(separator: "\n"))")
    }

    @Test("the doc rule sees a missing line and accepts attributes between doc and declaration")
    func ruleWorks() {
        let lines = [
            "/// Documented.", "public struct A {}",
            "public func b() {}",
            "/// Documented, with an attribute.", "@inlinable", "public func c() {}",
            "public extension D {}",
            "    public static let e = 1",
            "public final class F {}",
        ]
        #expect(Self.undocumentedPublicDeclarations(lines) == [2, 7, 8])
    }

    static let keywords: Set<String> = [
        "func", "var", "let", "struct", "enum", "class", "protocol", "typealias", "init", "actor", "subscript", "case",
    ]
    static let modifiers: Set<String> = [
        "static", "final", "class", "override", "mutating", "nonisolated", "convenience", "required", "indirect", "consuming",
        "borrowing", "private(set)", "fileprivate(set)", "internal(set)", "nonmutating", "lazy", "dynamic",
    ]

    /// Indices of lines declaring something `public`/`open` (extensions excepted) whose previous
    /// line, attributes skipped, is not a `///` comment.
    static func undocumentedPublicDeclarations(_ lines: [String]) -> [Int] {
        var result: [Int] = []
        for (index, line) in lines.enumerated() where isPublicDeclaration(line) {
            var previous = index - 1
            while previous >= 0, lines[previous].trimmingCharacters(in: .whitespaces).hasPrefix("@") { previous -= 1 }
            let above = previous >= 0 ? lines[previous].trimmingCharacters(in: .whitespaces) : ""
            if !(above.hasPrefix("///") || above.hasSuffix("*/")) { result.append(index) }
        }
        return result
    }

    static func isPublicDeclaration(_ line: String) -> Bool {
        var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        while let first = words.first, first.hasPrefix("@") { words.removeFirst() }
        guard let access = words.first, access == "public" || access == "open" else { return false }
        words.removeFirst()
        // `class` is a modifier before `func`/`var`, and the keyword of `public class Name`.
        while words.count > 1, modifiers.contains(words[0]), words[0] != "class" || keywords.contains(words[1]) || modifiers.contains(words[1]) {
            words.removeFirst()
        }
        guard let keyword = words.first else { return false }
        let bare = keyword.split(whereSeparator: { $0 == "(" || $0 == "<" }).first.map(String.init) ?? keyword
        return keywords.contains(bare)
    }
}

/// The server binary links no FoundationNetworking (issue 35): it pulls in libcurl, which the
/// runtime image does not ship, and every role then dies at start on `libcurl.so.4`.
@Suite("No FoundationNetworking in the server")
struct NoFoundationNetworkingTests {
    @Test("only the client library imports FoundationNetworking")
    func onlyTheClientLibrary() throws {
        var offenders: [String] = []
        // The server's modules: the tools (Tools/) are not in its binary.
        for file in try SourceRulesTests.swiftFiles(in: [SourceRulesTests.sources]) where !file.path.contains("/Sources/GatehouseClient/") {
            let text = try String(contentsOf: file, encoding: .utf8)
            if text.contains("import FoundationNetworking") || text.contains("URLSession") { offenders.append(file.path) }
        }
        #expect(offenders.isEmpty, "\(offenders)")
    }
}
