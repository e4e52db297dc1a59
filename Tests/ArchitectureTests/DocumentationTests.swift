import Foundation
import GatehouseTestSupport
import Testing

/// The guides stay connected: every relative link of every tracked Markdown file, and every
/// `#anchor`, lands (`scripts/check-links`).
@Suite("Documentation links")
struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("scripts/check-links finds no broken internal link or anchor")
    func linksLand() async throws {
        let result = try await runProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", Self.root.appendingPathComponent("scripts/check-links").path], in: Self.root)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("all good"))
    }

    @Test("the checker catches a broken link and a broken anchor (it is not a stub)")
    func checkerCatches() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gh-links-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try await runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["git", "init", "-q"], in: folder)
        try Data("# Guide\n\n## Real heading\n\n[ok](#real-heading) [gone](missing.md) [bad anchor](#nowhere)\n".utf8)
            .write(to: folder.appendingPathComponent("guide.md"))
        _ = try await runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["git", "add", "guide.md"], in: folder)
        let result = try await runProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", Self.root.appendingPathComponent("scripts/check-links").path], in: folder)
        #expect(result.status == 1)
        #expect(result.stdout.contains("missing.md") && result.stdout.contains("#nowhere"), "\(result.stdout)")
        #expect(!result.stdout.contains("#real-heading"), "\(result.stdout)")
    }
}
