import Foundation
import GatehouseTestSupport
import Testing

/// The client library is light to add (issue 37 §5): an app that depends on this package for
/// `GatehouseClient` with `traits: []` resolves none of the server's dependencies, so it neither
/// waits for them nor conflicts with its own versions of GRDB, swift-nio or the rest.
@Suite("GatehouseClient as an app adds it")
struct ClientPackageTests {
    /// A scratch app in a new folder depending on this repository for `GatehouseClient` with
    /// `traits`; the `swift package resolve` result and the pins of its Package.resolved.
    static func resolve(traits: String) async throws -> (result: ProcessResult, pins: [String]) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gh-scratch-app-\(UUID().uuidString)")
        let sources = folder.appendingPathComponent("Sources/ScratchApp")
        try FileManager.default.createDirectory(at: sources, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let manifest = """
            // swift-tools-version: 6.2
            import PackageDescription

            let package = Package(
                name: "ScratchApp",
                platforms: [.iOS(.v16), .macOS(.v15)],
                dependencies: [.package(name: "gatehouse", path: "\(BuiltProducts.packageRoot.path)", traits: \(traits))],
                targets: [.executableTarget(name: "ScratchApp", dependencies: [.product(name: "GatehouseClient", package: "gatehouse")])]
            )
            """
        try Data(manifest.utf8).write(to: folder.appendingPathComponent("Package.swift"))
        try Data("import GatehouseClient\nprint(GatehouseError.self)\n".utf8).write(to: sources.appendingPathComponent("main.swift"))
        let result = try await runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["swift", "package", "resolve"], in: folder)
        let resolved = folder.appendingPathComponent("Package.resolved")
        guard let data = try? Data(contentsOf: resolved) else { return (result, []) }
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let pins = (object?["pins"] as? [[String: Any]] ?? []).compactMap { $0["identity"] as? String }
        return (result, pins)
    }

    @Test("a scratch app depending on GatehouseClient with traits: [] resolves no package at all; with the default traits it would resolve the server's")
    func resolvesNothingOfTheServer() async throws {
        let light = try await Self.resolve(traits: "[]")
        #expect(light.result.status == 0, "\(light.result.stderr)")
        #expect(light.pins.isEmpty, "the app resolved \(light.pins)")
        // The contrast, so the check above can fail: the default traits (the server) resolve them.
        let heavy = try await Self.resolve(traits: "[.defaults]")
        #expect(heavy.result.status == 0, "\(heavy.result.stderr)")
        #expect(heavy.pins.contains("hummingbird") && heavy.pins.contains("grdb.swift"), "\(heavy.pins)")
    }
}
