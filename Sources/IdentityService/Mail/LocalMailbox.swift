import Foundation
import IdentityPorts
import GatehouseSupport
import Mail

/// The embedded default `MailTransport` (no `GATEHOUSE_SMTP_HOST`): each mail becomes one file
/// `<folder>/<ms>-<message id>.eml` holding `MailMessage.rendered()`, readable by its owner only
/// (0600, the folder 0700) and written atomically (a temporary file renamed into place), so a
/// reader never sees half a mail. `gatehouse mail list|show` prints them. A mail delivered
/// again (after a crash) is a second file with the same `Message-ID`. Files are removed by the
/// outbox's hourly purge once older than its retention (`purge(deliveredBefore:)`).
public struct LocalMailbox: RetainingMailTransport {
    /// The mailbox folder (`<data folder>/mailbox`).
    public let folder: URL
    /// The time in the file names.
    public let clock: WallClock

    /// A mailbox in `folder` (created at the first mail).
    public init(folder: URL, clock: WallClock = .system) {
        self.folder = folder
        self.clock = clock
    }

    /// The file name of `message` written at `date`: the milliseconds, then the Message-ID's
    /// letters, digits, dots and dashes (`@` as `_`).
    public static func fileName(_ message: MailMessage, at date: Date) -> String {
        let id = String(message.messageID.unicodeScalars.compactMap { scalar -> Character? in
            if scalar == "@" { return "_" }
            guard scalar.isASCII, CharacterSet.alphanumerics.contains(scalar) || scalar == "." || scalar == "-" else { return nil }
            return Character(scalar)
        }.prefix(120))
        return "\(date.millisecondsSince1970)-\(id).eml"
    }

    /// Writes the mail's file; a failure to write is `.transient` (a full disk may recover).
    public func deliver(_ message: MailMessage) async throws {
        if let problem = message.problem { throw MailDeliveryError.permanent(problem) }
        let path = folder.appendingPathComponent(Self.fileName(message, at: clock.now)).path
        do {
            try Self.makeFolder(folder.path)
            try Self.writeAtomically(Array(message.rendered().utf8), to: path)
        } catch {
            throw MailDeliveryError.transient("cannot write to the mailbox \(folder.path): \(error)")
        }
    }

    /// Removes the files (mails, and temporary files left by a crash) whose name says they were
    /// written before `date`; other files are left alone. A missing folder holds nothing.
    public func purge(deliveredBefore date: Date) throws -> Int {
        guard FileManager.default.fileExists(atPath: folder.path) else { return 0 }
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        let cutoff = date.millisecondsSince1970
        var removed = 0
        for name in names {
            guard let dash = name.firstIndex(of: "-"), let written = Int64(name[..<dash]), written < cutoff, name.contains(".eml") else { continue }
            if unlink(folder.appendingPathComponent(name).path) == 0 { removed += 1 }
        }
        return removed
    }

    static func makeFolder(_ path: String) throws {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// Writes `bytes` to a new 0600 temporary file beside `path`, flushes it, and renames it to `path`.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        let temporary = path + ".tmp-\(UInt64.random(in: 0...UInt64.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var failure: Int32 = 0
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += written
            }
        }
        if failure == 0, fsync(fd) != 0 { failure = errno }
        close(fd)
        if failure == 0, rename(temporary, path) != 0 { failure = errno }
        if failure != 0 {
            unlink(temporary)
            throw POSIXError(POSIXErrorCode(rawValue: failure) ?? .EIO)
        }
    }
}
