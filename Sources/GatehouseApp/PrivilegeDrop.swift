import Foundation
import GatehouseSupport
#if canImport(Glibc)
// libc's `struct stat` is attributed to the first module that included <sys/stat.h>: NIO's
// CNIOLinux in a debug build, CoreFoundation in a release build with --static-swift-stdlib (the
// image's) (swiftlang/swift#85427). Its fields need that import (MemberImportVisibility): both.
import CNIOLinux
import CoreFoundation
import Glibc
#endif

/// Gives up root at the start of every `gatehouse` command when `GATEHOUSE_RUN_AS` names a user
/// (issue 35). The container image sets it and starts as root, as the official PostgreSQL and
/// Redis images do, so that the operator's secret files work as compose bind-mounts them: owned by
/// the operator, mode 0600, which the image's user (uid 10001) could not open. As root the process
/// reads every secret file it is given (`SecretFiles.preload`), makes its data folder the user's
/// (a restored backup copied in as root, a fresh bind mount), then switches to the user for good
/// before it opens a database, a socket or a port. Started as any other user, it does nothing.
public enum PrivilegeDrop {
    /// `GATEHOUSE_RUN_AS`: `UID:GID`, numeric.
    public static let variable = "GATEHOUSE_RUN_AS"

    /// Commands whose data folder is handed to the user before the switch (the roles, and the
    /// commands that write into it).
    static let ownsDataFolder: Set<String> = ["serve", "identity", "token", "gateway", "backup", "restore", "store", "keys", "users", "admin", "audit", "mail"]

    /// Why the switch could not be made; the process must stop rather than go on as root.
    public struct Failure: Error, CustomStringConvertible {
        /// One line for the operator.
        public let description: String
    }

    /// The user and group of `text` (`UID:GID`, neither 0).
    public static func parse(_ text: String) throws -> (uid: uid_t, gid: gid_t) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let uid = UInt32(parts[0]), let gid = UInt32(parts[1]), uid != 0, gid != 0 else {
            throw Failure(description: "\(variable) must be UID:GID, two numbers other than 0 (the image sets 10001:10001), not '\(text)'")
        }
        return (uid, gid)
    }

    /// The files named by `environment` and `arguments`: every `GATEHOUSE_*_FILE` variable but
    /// the test clock, and the value of every `--*-file` flag (`--password-file P` or `=P`).
    public static func secretPaths(environment: [String: String], arguments: [String]) -> [String] {
        var paths = environment.filter { $0.key.hasPrefix("GATEHOUSE_") && $0.key.hasSuffix("_FILE") && $0.key != ConfigTable.testClockFile.env }.map(\.value)
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                if argument[..<equals].hasSuffix("-file") { paths.append(String(argument[argument.index(after: equals)...])) }
            } else if argument.hasPrefix("--"), argument.hasSuffix("-file"), index + 1 < arguments.count {
                paths.append(arguments[index + 1])
                index += 1
            }
            index += 1
        }
        return paths.filter { !$0.isEmpty }
    }

    /// The data folder: `--data-dir`, else `GATEHOUSE_DATA_DIR`, else the default.
    static func dataFolder(environment: [String: String], arguments: [String]) -> String {
        for (index, argument) in arguments.enumerated() {
            if argument == "--data-dir", index + 1 < arguments.count { return arguments[index + 1] }
            if argument.hasPrefix("--data-dir=") { return String(argument.dropFirst("--data-dir=".count)) }
        }
        return environment[ConfigTable.dataDir.env] ?? ConfigTable.dataDir.defaultValue ?? "./.gatehouse"
    }

    /// Applies `GATEHOUSE_RUN_AS` for the command line `arguments` (without the program name):
    /// nothing unless the process is root and the variable is set; otherwise preloads the secret
    /// files, hands the data folder to the user and switches to it, or throws.
    public static func apply(environment: [String: String] = ProcessInfo.processInfo.environment, arguments: [String]) throws {
        guard let text = environment[variable], !text.isEmpty else { return }
        let (uid, gid) = try parse(text)
        guard getuid() == 0 || geteuid() == 0 else { return }
        // `keys generate` writes a key set where it is told, for whoever ran it (`docker run
        // --user "$(id -u):$(id -g)"` leaves the files the operator's; as root they are root's,
        // which the roles read before their own switch). Switching would leave it unable to
        // write into the operator's folder.
        if arguments.starts(with: ["keys", "generate"]) { return }
        SecretFiles.preload(secretPaths(environment: environment, arguments: arguments))
        if let command = arguments.first, ownsDataFolder.contains(command) {
            try handOver(dataFolder(environment: environment, arguments: arguments), uid: uid, gid: gid)
        }
        guard setgroups(0, nil) == 0, setgid(gid) == 0, setuid(uid) == 0 else {
            throw Failure(description: "\(variable)=\(text): cannot switch to that user (\(String(cString: strerror(errno)))); refusing to run as root")
        }
        guard getuid() == uid, geteuid() == uid, getgid() == gid, getegid() == gid, setuid(0) != 0 else {
            throw Failure(description: "\(variable)=\(text): the switch did not hold; refusing to run as root")
        }
    }

    /// Makes `folder` and everything in it (symbolic links not followed) owned by `uid:gid`, and
    /// the folder itself 0700 when others could read it. A missing folder is left for the role to
    /// make, as the user.
    static func handOver(_ folder: String, uid: uid_t, gid: gid_t) throws {
        var info = stat()
        guard lstat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return }
        try own(folder, info, uid: uid, gid: gid)
        if info.st_mode & 0o077 != 0 { chmod(folder, 0o700) }
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return }
        while let relative = walker.nextObject() as? String {
            let path = folder + "/" + relative
            var entry = stat()
            guard lstat(path, &entry) == 0 else { continue }
            try own(path, entry, uid: uid, gid: gid)
        }
    }

    static func own(_ path: String, _ info: stat, uid: uid_t, gid: gid_t) throws {
        guard info.st_uid != uid || info.st_gid != gid else { return }
        guard lchown(path, uid, gid) == 0 else {
            throw Failure(description: "cannot give \(path) to \(uid):\(gid) (\(String(cString: strerror(errno))))")
        }
    }
}
