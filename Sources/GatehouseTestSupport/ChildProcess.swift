import CTestSupport
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn` for the tests, instead of Foundation's `Process`:
/// on Linux, `Process.run()` of Swift 6.3 reads `/proc/self/fd` with a bulk copy of each
/// `dirent` that can run past glibc's buffer and crash the whole test process (SIGSEGV in a
/// memcpy; swift-corelibs-foundation PR #5472). It struck about one full parallel run in ten here
/// (a test process with many descriptors open), whatever lock serialized the launches.
///
/// The child gets `/dev/null` or the given descriptors as its standard input, output and error,
/// and no other descriptor of the test process (`posix_spawn_file_actions_addclosefrom_np`).
/// Linux only, as the test suite is.
public final class ChildProcess: Sendable {
    /// How the process ended.
    public enum TerminationReason: Sendable, Equatable {
        /// It exited (`terminationStatus` is its exit status).
        case exit
        /// A signal ended it (`terminationStatus` is the signal number).
        case uncaughtSignal
    }

    /// The process id.
    public let processIdentifier: Int32
    private let ended = Mutex<(reason: TerminationReason, status: Int32)?>(nil)

    private init(pid: Int32) { processIdentifier = pid }

    /// Starts `executable` with `arguments` (and `environment`, else this process's, and in
    /// `directory`, else the current one); its standard streams are these descriptors (nil:
    /// `/dev/null`), duplicated into the child: the caller keeps and closes its own.
    public static func spawn(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, directory: URL? = nil,
        stdin: Int32? = nil, stdout: Int32? = nil, stderr: Int32? = nil
    ) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard null >= 0 else { throw ChildProcessError(message: "cannot open /dev/null: errno \(errno)") }
        defer { close(null) }
        for (source, target) in [(stdin ?? null, Int32(0)), (stdout ?? null, Int32(1)), (stderr ?? null, Int32(2))] {
            posix_spawn_file_actions_adddup2(&actions, source, target)
        }
        gatehouse_spawn_addclosefrom(&actions, 3)
        if let directory { gatehouse_spawn_addchdir(&actions, directory.path) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Nothing blocked, default dispositions: SIGTERM must reach the child even when the thread
        // that spawned it had signals blocked; its own process group, as Foundation's children.
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let environment = environment ?? ProcessInfo.processInfo.environment
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable.path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw ChildProcessError(message: "cannot start \(executable.path): \(String(cString: strerror(result)))")
        }
        return ChildProcess(pid: pid)
    }

    /// Reaps the child if it ended (without blocking); true once it has.
    private func reap() -> Bool {
        ended.withLock { ended in
            if ended != nil { return true }
            var status: Int32 = 0
            let reaped = waitpid(processIdentifier, &status, WNOHANG)
            guard reaped == processIdentifier else {
                // Someone else reaped it (or it is not our child): count it as ended, unknown status.
                if reaped < 0, errno == ECHILD { ended = (.exit, -1) }
                return ended != nil
            }
            let signal = status & 0x7F
            ended = signal == 0 ? (.exit, (status >> 8) & 0xFF) : (.uncaughtSignal, signal)
            return true
        }
    }

    /// Whether it is still running.
    public var isRunning: Bool { !reap() }

    /// Its exit status, or the signal that ended it (see `terminationReason`); -1 while running.
    public var terminationStatus: Int32 { reap() ? ended.withLock { $0?.status ?? -1 } : -1 }

    /// How it ended (`.exit` while it runs).
    public var terminationReason: TerminationReason { reap() ? ended.withLock { $0?.reason ?? .exit } : .exit }

    /// Sends SIGTERM.
    public func terminate() { kill(processIdentifier, SIGTERM) }

    /// Blocks until it ended (polling every 5 ms; for dispatch threads, not the cooperative pool).
    public func waitUntilExit() {
        while !reap() { usleep(5_000) }
    }

    /// Waits until it ended, on a dispatch thread (not the cooperative pool).
    public func exited() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.waitUntilExit()
                continuation.resume()
            }
        }
    }

    /// Sends `signal` (SIGTERM: a graceful shutdown) if it is still running, and waits until it ended.
    public func stop(signal: Int32 = SIGTERM) async {
        if isRunning { kill(processIdentifier, signal) }
        await exited()
    }
}

/// A child process could not be started.
public struct ChildProcessError: Error, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    /// The message.
    public var description: String { message }
}
