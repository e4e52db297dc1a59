import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A clock shared by processes for end-to-end tests: the system time plus an offset that a test
/// writes into an 8-byte file (milliseconds, little-endian `Int64`). Every process started with
/// the same file (`GATEHOUSE_TEST_CLOCK_FILE`) maps it and reads the offset at each `now`, so a
/// test moves the clock of three processes at once by rewriting eight bytes, without sleeping.
///
/// Production never sets the file: roles then use `WallClock.system`, and this costs nothing.
public final class OffsetClockFile: @unchecked Sendable {
    private let mapping: UnsafeMutableRawPointer
    /// The file's path.
    public let path: String

    /// Maps `path`, creating it (0600, offset 0) when missing. Throws when it cannot be mapped,
    /// and refuses (before changing it) a file anyone else could move the clock with: a symbolic
    /// link (`O_NOFOLLOW`), anything but a regular file, a file owned by another user than the
    /// process's effective one, or one writable by its group or others (checked with `fstat` on
    /// the opened descriptor, so the checked file is the mapped one).
    public init(path: String) throws {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP { throw OffsetClockFileError(path: path, errno: code, refused: "it is a symbolic link") }
            throw OffsetClockFileError(path: path, errno: code)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw OffsetClockFileError(path: path, errno: errno) }
        if let reason = Self.refusal(info) { throw OffsetClockFileError(path: path, errno: 0, refused: reason) }
        if info.st_size < 8, ftruncate(fd, 8) != 0 { throw OffsetClockFileError(path: path, errno: errno) }
        guard let mapped = mmap(nil, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), mapped != MAP_FAILED else {
            throw OffsetClockFileError(path: path, errno: errno)
        }
        mapping = mapped
    }

    deinit { munmap(mapping, 8) }

    /// Why a file with `info` may not hold the clock, nil when it may.
    static func refusal(_ info: stat) -> String? {
        if info.st_mode & 0o170000 != 0o100000 { return "it is not a regular file" }  // S_IFMT, S_IFREG
        if info.st_uid != geteuid() { return "it is owned by uid \(info.st_uid), not by this process's user (uid \(geteuid()))" }
        if info.st_mode & 0o022 != 0 {
            return "it is writable by its group or others (mode \(String(info.st_mode & 0o777, radix: 8))); chmod go-w it, or remove it to have it created 0600"
        }
        return nil
    }

    /// The offset now in the file.
    public var offset: Duration {
        get { .milliseconds(Int64(littleEndian: mapping.load(as: Int64.self))) }
    }

    /// Writes a new offset (seen by every process mapping the file at its next `now`).
    public func set(offset: Duration) {
        let (seconds, attoseconds) = offset.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        mapping.storeBytes(of: milliseconds.littleEndian, as: Int64.self)
    }

    /// Moves the shared clock forward (or back, for a negative `duration`).
    public func advance(by duration: Duration) { set(offset: offset + duration) }

    /// A wall clock reading the system time plus the file's offset.
    public var clock: WallClock {
        WallClock { [self] in
            Date(timeIntervalSince1970: Date().timeIntervalSince1970 + Double(Int64(littleEndian: mapping.load(as: Int64.self))) / 1000)
        }
    }
}

/// The test clock's file could not be opened or mapped, or was refused.
public struct OffsetClockFileError: Error, CustomStringConvertible {
    /// The file.
    public let path: String
    /// The failing call's errno (0 when the file was refused after it opened).
    public let errno: Int32
    /// Why the file was refused (wrong owner, mode or type), nil when a call failed.
    public let refused: String?

    /// A failure of a call with `errno`, or a refusal of the file for the reason `refused`.
    public init(path: String, errno: Int32, refused: String? = nil) {
        self.path = path
        self.errno = errno
        self.refused = refused
    }

    /// What failed, for the start-up message.
    public var description: String {
        if let refused { return "refusing the test clock file \(path): \(refused)" }
        return "cannot map the test clock file \(path): \(String(cString: strerror(errno)))"
    }
}
