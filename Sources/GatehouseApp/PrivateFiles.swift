import Foundation
#if canImport(Glibc)
// libc's `struct stat` is attributed to the first module that included <sys/stat.h>: NIO's
// CNIOLinux in a debug build, CoreFoundation in a release build with --static-swift-stdlib (the
// image's) (swiftlang/swift#85427). Its fields need that import (MemberImportVisibility): both.
import CNIOLinux
import CoreFoundation
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Keeps the data folder private whatever the umask: the folder 0700, every file in it 0600
/// (databases, their `-wal`/`-shm`/`-journal` files, the key-encryption key). SQLite gives a
/// database's WAL and SHM files the mode of the database file, so a database created here
/// 0600 keeps its companions 0600 too.
enum PrivateFiles {
    /// Creates `folder` (0700) or narrows it, narrows the files in it to 0600, and creates the
    /// database file at `databasePath` (in `folder`) empty and 0600 if it does not exist yet.
    /// Returns one line per mode it had to narrow, for a warning.
    static func secure(folder: URL, databasePath: String) throws -> [String] {
        var fixed: [String] = []
        let fm = FileManager.default
        if !fm.fileExists(atPath: folder.path) {
            try fm.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        if let line = try narrow(folder.path, to: 0o700) { fixed.append(line) }
        for name in try fm.contentsOfDirectory(atPath: folder.path) {
            let path = folder.appendingPathComponent(name).path
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            if let line = try narrow(path, to: 0o600) { fixed.append(line) }
        }
        if !fm.fileExists(atPath: databasePath) {
            let fd = open(databasePath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw ConfigError(message: "cannot create \(databasePath): \(String(cString: strerror(errno)))") }
            fchmod(fd, 0o600)
            close(fd)
        }
        return fixed
    }

    /// Clears the bits of `path`'s mode outside `mode`; returns "path: 0644 → 0600" if any were set.
    static func narrow(_ path: String, to mode: mode_t) throws -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { throw ConfigError(message: "cannot read the mode of \(path): \(String(cString: strerror(errno)))") }
        let current = info.st_mode & 0o7777
        guard current & ~mode != 0 else { return nil }
        let narrowed = current & mode
        guard chmod(path, narrowed) == 0 else {
            throw ConfigError(message: "cannot make \(path) private (chmod \(String(narrowed, radix: 8))): \(String(cString: strerror(errno)))")
        }
        return "\(path): 0\(String(current, radix: 8)) → 0\(String(narrowed, radix: 8))"
    }
}
