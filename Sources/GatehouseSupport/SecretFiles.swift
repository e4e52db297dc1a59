import Foundation
import Synchronization

/// Reads the files that hold secrets (CURVE keys, the key-encryption key, database and SMTP
/// passwords, admin keys). A process started as root that gives up root at once
/// (`GATEHOUSE_RUN_AS`, the container image) reads them first with `preload`, while it can: a
/// file bind-mounted by compose keeps its owner and mode on the host (0600, the operator's), which
/// the unprivileged user could not open. Every later read of the same path is answered from
/// memory; any other path is read from disk.
public enum SecretFiles {
    /// The largest file preloaded (a key or a password is a few hundred bytes at most).
    public static let maxPreloadBytes = 1 << 20

    private static let preloaded = Mutex<[String: Data]>([:])

    /// The contents of the file at `path`: preloaded, else read now; nil when it cannot be read.
    /// Read through a file handle, so a character device such as `/dev/null` gives empty data.
    public static func contents(atPath path: String) -> Data? {
        if let data = preloaded.withLock({ $0[path] }) { return data }
        return read(path)
    }

    /// Reads each readable file of `paths` (regular files up to `maxPreloadBytes`, and character
    /// devices) into memory for `contents(atPath:)`. Paths that cannot be read are left alone:
    /// the setting that names them reports it when it is read.
    public static func preload(_ paths: [String]) {
        for path in Set(paths) where !path.isEmpty {
            var info = stat()
            guard stat(path, &info) == 0 else { continue }
            let kind = info.st_mode & S_IFMT
            guard (kind == S_IFREG && Int(info.st_size) <= maxPreloadBytes) || kind == S_IFCHR else { continue }
            if let data = read(path) { preloaded.withLock { $0[path] = data } }
        }
    }

    /// Forgets every preloaded file (tests).
    public static func reset() { preloaded.withLock { $0.removeAll() } }

    static func read(_ path: String) -> Data? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        return try? handle.read(upToCount: maxPreloadBytes + 1) ?? Data()
    }
}
