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

    /// Maps `path`, creating it (0600, offset 0) when missing. Throws when it cannot be mapped.
    public init(path: String) throws {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw OffsetClockFileError(path: path, errno: errno) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw OffsetClockFileError(path: path, errno: errno) }
        if info.st_size < 8, ftruncate(fd, 8) != 0 { throw OffsetClockFileError(path: path, errno: errno) }
        guard let mapped = mmap(nil, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), mapped != MAP_FAILED else {
            throw OffsetClockFileError(path: path, errno: errno)
        }
        mapping = mapped
    }

    deinit { munmap(mapping, 8) }

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

/// The test clock's file could not be opened or mapped.
public struct OffsetClockFileError: Error, CustomStringConvertible {
    /// The file.
    public let path: String
    /// The failing call's errno.
    public let errno: Int32
    /// What failed, for the start-up message.
    public var description: String { "cannot map the test clock file \(path): \(String(cString: strerror(errno)))" }
}
