import Foundation

/// A fresh folder under the system's temporary directory with a unique name, so tests running
/// in parallel never share a database, key file or data folder. Remove it with `remove()`
/// (usually in a `defer`).
public struct TemporaryDirectory: Sendable {
    /// The folder.
    public let url: URL

    /// Creates `<tmp>/<prefix>-<UUID>`.
    public init(prefix: String = "gatehouse-tests") throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The folder's path.
    public var path: String { url.path }

    /// `name` inside the folder (not created).
    public func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    /// The path of `name` inside the folder (not created).
    public func path(_ name: String) -> String { file(name).path }

    /// Deletes the folder and everything in it; errors are ignored.
    public func remove() { try? FileManager.default.removeItem(at: url) }
}
