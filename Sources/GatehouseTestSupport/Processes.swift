import CTestSupport
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Executables SwiftPM built alongside the tests (`gatehouse`, the crash writers).
public enum BuiltProducts {
    /// The package's root folder (where `Package.swift` is).
    public static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The executable `name` from the build products folder that holds the test bundle (so
    /// debug and release test runs each find their own), else from `.build/debug`.
    public static func executable(named name: String) throws -> URL {
        var candidates: [URL] = []
        for bundle in Bundle.allBundles + [Bundle.main] {
            var dir = bundle.bundleURL
            for _ in 0..<4 {
                candidates.append(dir.appendingPathComponent(name))
                dir = dir.deletingLastPathComponent()
            }
        }
        candidates.append(packageRoot.appendingPathComponent(".build/debug/\(name)"))
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) { return found }
        throw ProcessFailure("the executable \(name) was not found next to the tests; run `swift build --build-tests` first")
    }
}

/// A child process that could not be found, started or read.
public struct ProcessFailure: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String
    /// A failure saying `description`.
    public init(_ description: String) { self.description = description }
}

/// The outcome of a process run to completion.
public struct ProcessResult: Sendable {
    /// The exit status (or the signal number, if a signal ended it).
    public let status: Int32
    /// Everything it wrote to standard output.
    public let stdout: String
    /// Everything it wrote to standard error.
    public let stderr: String

    /// A result with these fields.
    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }
}

/// Runs `executable` (in `directory`, if given) to completion without holding a thread of the cooperative pool while it
/// runs (parallel suites share two of them). Output goes through temporary files, so a chatty
/// child cannot fill a pipe and block.
public func runProcess(
    _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, stdin: Data? = nil, in directory: URL? = nil
) async throws -> ProcessResult {
    let run = try ChildRun(executable, arguments, environment: environment, stdin: stdin, in: directory)
    await run.process.exited()
    return run.result()
}

/// `runProcess`, blocking the calling thread (for static initializers and synchronous helpers).
public func runProcessSync(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil) throws -> ProcessResult {
    let run = try ChildRun(executable, arguments, environment: environment, stdin: nil, in: nil)
    run.process.waitUntilExit()
    return run.result()
}

/// One child run to completion, its output in temporary files.
private struct ChildRun {
    let folder: TemporaryDirectory
    let process: ChildProcess

    init(_ executable: URL, _ arguments: [String], environment: [String: String]?, stdin: Data?, in directory: URL?) throws {
        folder = try TemporaryDirectory(prefix: "gh-run")
        let out = open(folder.path("stdout"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        let err = open(folder.path("stderr"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer {
            close(out)
            close(err)
        }
        guard out >= 0, err >= 0 else { throw ProcessFailure("cannot create the output files of \(executable.path)") }
        var input: Int32?
        if let stdin {
            let file = folder.path("stdin")
            try stdin.write(to: URL(fileURLWithPath: file))
            input = open(file, O_RDONLY | O_CLOEXEC)
        }
        defer { if let input { close(input) } }
        process = try ChildProcess.spawn(
            executable, arguments, environment: environment, directory: directory, stdin: input, stdout: out, stderr: err)
    }

    func result() -> ProcessResult {
        defer { folder.remove() }
        return ProcessResult(
            status: process.terminationStatus,
            stdout: (try? String(contentsOf: folder.file("stdout"), encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: folder.file("stderr"), encoding: .utf8)) ?? "")
    }
}

/// Starts `executable` in the background and returns it running. Its output goes to `log`
/// (created or truncated) when given, else nowhere. Stop it with `stop(signal:)`.
public func launchProcess(
    _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, log: URL? = nil
) throws -> ChildProcess {
    guard let log else { return try ChildProcess.spawn(executable, arguments, environment: environment) }
    let fd = open(log.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw ProcessFailure("cannot create the log file \(log.path)") }
    defer { close(fd) }
    return try ChildProcess.spawn(executable, arguments, environment: environment, stdout: fd, stderr: fd)
}

/// Runs `executable`, reads its standard output until at least `count` lines arrived (or it
/// closed its output), kills it with SIGKILL, and returns every complete line it printed,
/// including those printed between the last read and the kill, with the ended process.
/// For crash tests: a child prints a line after each acknowledged write.
public func runUntilLinesThenKill(_ executable: URL, _ arguments: [String], count: Int) async throws -> (lines: [String], process: ChildProcess) {
    var ends: [Int32] = [0, 0]
    guard gatehouse_pipe_cloexec(&ends) == 0 else { throw ProcessFailure("cannot make a pipe: errno \(errno)") }
    let process: ChildProcess
    do {
        process = try ChildProcess.spawn(executable, arguments, stdout: ends[1])
        close(ends[1])
    } catch {
        close(ends[0])
        close(ends[1])
        throw error
    }
    let handle = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
    // The reads block: they run on a dispatch thread, not on the cooperative pool.
    let lines: [String] = await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            var buffer = Data()
            var lines: [String] = []
            func split() {
                while let newline = buffer.firstIndex(of: 0x0A) {
                    lines.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
            }
            while lines.count < count {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                split()
            }
            kill(process.processIdentifier, SIGKILL)
            // A partial last line (no newline) is not counted.
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                split()
            }
            process.waitUntilExit()
            continuation.resume(returning: lines)
        }
    }
    return (lines, process)
}

/// Ports handed out by `freeLoopbackPort()` in this test process, never handed out twice.
private let handedOut = Mutex<Set<Int>>([])

/// A loopback TCP port that was free a moment ago, never one this process handed out before,
/// so suites running in parallel do not get the same port. It lies outside the kernel's
/// ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), where the source ports of
/// outgoing connections come from: a test that kills a process and starts it again on the same
/// port would otherwise, now and then, find the port taken by some connection's source port.
/// Another program may still bind it before the test does; bind to port 0 where the code under
/// test can report the port it got.
public func freeLoopbackPort() -> Int {
    let pool = testPortPool
    while true {
        let port = Int.random(in: pool)
        guard handedOut.withLock({ $0.insert(port).inserted }) else { continue }
        if loopbackPortIsFree(port) { return port }
    }
}

/// The ports `freeLoopbackPort()` picks from: below the ephemeral range when there is room
/// (Linux's default range starts at 32768), else above it.
private let testPortPool: ClosedRange<Int> = {
    var low = 32_768, high = 60_999
    if let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8) {
        let numbers = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
        if numbers.count == 2 { (low, high) = (numbers[0], numbers[1]) }
    }
    if low > 12_000 { return 10_000...(low - 1) }
    return (high + 1)...65_535
}()

/// Whether a listening socket could bind 127.0.0.1:`port` now (nothing bound to it, nothing
/// lingering on it).
private func loopbackPortIsFree(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    let length = socklen_t(MemoryLayout<sockaddr_in>.size)
    return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } } == 0
}
