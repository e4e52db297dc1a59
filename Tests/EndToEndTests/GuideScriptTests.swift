import Foundation
import GatehouseTestSupport
import Testing

/// Every shell block of the front page and the guides that a reader would paste is run here
/// (issue 37 §1), so the commands stay true: each guide's blocks run in order in one bash
/// session (`set -euo pipefail`, so a variable set in one block serves the next) against a fresh
/// `gatehouse serve`, with `gatehouse` on the PATH. A block that cannot run here says why, in a
/// `<!-- not run: … -->` line right above it (it starts the stack, needs Docker, runs for minutes).
@Suite("guides: every shell block runs")
struct GuideScriptTests {
    struct Block {
        var code: String
        /// Why it is not run; nil when it is.
        var notRun: String?
        var line: Int
    }

    static let root = BuiltProducts.packageRoot

    /// The Markdown files a reader follows: the front page and every guide under docs/.
    static func guides() -> [String] {
        var paths = ["README.md"]
        let docs = root.appendingPathComponent("docs")
        let enumerator = FileManager.default.enumerator(at: docs, includingPropertiesForKeys: nil)
        while let url = enumerator?.nextObject() as? URL {
            if url.pathExtension == "md" { paths.append(String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1))) }
        }
        return paths.sorted()
    }

    /// The shell blocks (```sh, ```bash, ```shell) of `text`, with the `not run` reason above each.
    static func blocks(in text: String) -> [Block] {
        var blocks: [Block] = []
        let lines = text.components(separatedBy: "\n")
        var index = 0
        while index < lines.count {
            let line = lines[index]
            guard line.hasPrefix("```"), ["```sh", "```bash", "```shell"].contains(line.trimmingCharacters(in: .whitespaces)) else {
                if line.hasPrefix("```") {  // another language: skip to its end
                    index += 1
                    while index < lines.count, !lines[index].hasPrefix("```") { index += 1 }
                }
                index += 1
                continue
            }
            var previous = index - 1
            while previous >= 0, lines[previous].trimmingCharacters(in: .whitespaces).isEmpty { previous -= 1 }
            var reason: String?
            if previous >= 0, let range = lines[previous].range(of: "<!-- not run: ") {
                reason = String(lines[previous][range.upperBound...].prefix { $0 != "-" }).trimmingCharacters(in: .whitespaces)
            }
            var code: [String] = []
            let start = index + 1
            index += 1
            while index < lines.count, !lines[index].hasPrefix("```") {
                code.append(lines[index])
                index += 1
            }
            blocks.append(Block(code: code.joined(separator: "\n"), notRun: reason, line: start))
            index += 1
        }
        return blocks
    }

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The guides with at least one block to run.
    static let runnable: [String] = guides().filter { path in
        ((try? text(path)).map { blocks(in: $0).contains { $0.notRun == nil } }) ?? false
    }

    @Test("every shell block of the guides is run, or says why not")
    func everyBlockRunsOrSaysWhy() throws {
        var total = 0, run = 0
        for path in Self.guides() {
            for block in Self.blocks(in: try Self.text(path)) {
                total += 1
                if let reason = block.notRun {
                    #expect(reason.count >= 10, "\(path):\(block.line): say why the block is not run")
                } else {
                    run += 1
                }
            }
        }
        #expect(run > 0 && total > 0)
        #expect(Self.runnable.contains("README.md"))
    }

    @Test("a guide's shell blocks run, in order, against gatehouse serve", arguments: runnable)
    func guideRuns(path: String) async throws {
        let blocks = Self.blocks(in: try Self.text(path)).filter { $0.notRun == nil }
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("serve")
        try await stack.waitReady()
        var script = "set -euo pipefail\ncd \"$GUIDE_DIR\"\n"
        for block in blocks {
            script += "echo '--- \(path):\(block.line)' >&2\n" + block.code + "\n"
        }
        // The guides speak of the default addresses and data folder; the stack has its own.
        script = script
            .replacingOccurrences(of: "localhost:8080", with: "127.0.0.1:\(stack.httpPort)")
            .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(stack.httpPort)")
            .replacingOccurrences(of: "localhost:8081", with: "127.0.0.1:\(stack.adminPort)")
            .replacingOccurrences(of: "127.0.0.1:8081", with: "127.0.0.1:\(stack.adminPort)")
            .replacingOccurrences(of: ".build/release/gatehouse", with: "gatehouse")
            .replacingOccurrences(of: "--data-dir .gatehouse", with: "--data-dir \(stack.dataDir.path)")
        let work = stack.dataDir.appendingPathComponent("guide")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        var environment = stack.environment
        environment["PATH"] = try gatehouseBinary().deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["GUIDE_DIR"] = work.path
        let result = try await runProcess(URL(fileURLWithPath: "/bin/bash"), ["-c", script], environment: environment)
        #expect(result.status == 0, "\(path): exit \(result.status)\n--- stdout\n\(result.stdout.suffix(3000))\n--- stderr\n\(result.stderr.suffix(3000))")
        // A block's curl must not have been answered with a problem: the guides show what works.
        #expect(!result.stdout.contains("https://gatehouse.dev/errors/"), "\(path): a problem came back\n\(result.stdout.suffix(3000))")
        #expect(!result.stdout.contains("HTTP/1.1 4") && !result.stdout.contains("HTTP/1.1 5"), "\(path): an error status\n\(result.stdout.suffix(3000))")
    }
}
