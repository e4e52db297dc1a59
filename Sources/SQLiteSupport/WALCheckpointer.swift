import Foundation
import GRDBSQLite
import Synchronization

/// Checkpoints a WAL-mode database from a connection and thread of its own.
///
/// SQLite's automatic checkpoint runs inside the commit that pushes the WAL past 1,000 pages, on
/// the writer's connection: that commit (and, under group commit, every write queued behind it)
/// waits while the checkpoint copies pages into the database file and fsyncs it. On this
/// machine that made one refresh in a few hundred wait 20–40 ms. A store that owns one of these
/// turns the automatic checkpoint off (`PRAGMA wal_autocheckpoint = 0` on its connections) and
/// lets this thread run a PASSIVE checkpoint every `interval` instead: PASSIVE never blocks the
/// writer or readers, and once every frame is copied back SQLite starts the WAL over from its
/// beginning at the next commit, so the file stays small.
///
/// Durability is unchanged: a commit is as durable as it was (WAL written before the commit
/// returns, fsynced with `synchronous = FULL`); the checkpoint only moves committed pages.
public final class WALCheckpointer: Sendable {
    /// The settings a store applies to each of its connections when it uses a checkpointer: no
    /// automatic checkpoint in commits, and a WAL that is cut back to 64 MiB after a reset.
    public static let connectionPragmas = ["PRAGMA wal_autocheckpoint = 0", "PRAGMA journal_size_limit = 67108864"]

    /// What the thread uses; the thread holds this, not the checkpointer, so dropping the
    /// checkpointer (its store) stops the thread.
    private final class Shared: Sendable {
        struct Counts {
            var stopped = false
            var checkpoints = 0
            var framesCopied = 0
        }
        let state = Mutex(Counts())
        let wake = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let interval: Duration

        init(interval: Duration) { self.interval = interval }

        func run(_ connection: Connection) {
            let nanos = interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
            while true {
                _ = wake.wait(timeout: .now() + .nanoseconds(Int(nanos)))
                if state.withLock({ $0.stopped }) { return }
                var logFrames: Int32 = 0
                var copied: Int32 = 0
                let code = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &copied)
                // SQLITE_BUSY (another checkpoint is running) and SQLITE_LOCKED: tried again next time.
                if code == SQLITE_OK, copied > 0 {
                    state.withLock {
                        $0.checkpoints += 1
                        $0.framesCopied += Int(copied)
                    }
                }
            }
        }
    }

    private let shared: Shared
    public var interval: Duration { shared.interval }

    /// Opens a connection to the database at `path` (which must already be in WAL mode) and
    /// starts checkpointing every `interval`.
    public init(path: String, interval: Duration = .milliseconds(100)) throws {
        shared = Shared(interval: interval)
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "code \(code)"
            sqlite3_close_v2(handle)
            throw CheckpointerError(message: "cannot open \(path) for checkpoints: \(message)")
        }
        // The writer may hold its lock for a moment: wait for it rather than fail at once.
        sqlite3_busy_timeout(handle, 1000)
        // A connection learns that the file is in WAL mode when it first reads it; until then a
        // checkpoint through it does nothing.
        let read = sqlite3_exec(handle, "SELECT count(*) FROM sqlite_master", nil, nil, nil)
        guard read == SQLITE_OK else {
            let message = String(cString: sqlite3_errmsg(handle))
            sqlite3_close_v2(handle)
            throw CheckpointerError(message: "cannot read \(path) for checkpoints: \(message)")
        }
        let connection = Connection(handle: handle)
        let shared = self.shared
        let thread = Thread {
            Self.nameCurrentThread("wal-checkpoint")
            shared.run(connection)
            connection.close()
            shared.finished.signal()
        }
        thread.stackSize = 256 << 10
        thread.start()
    }

    deinit { stop() }

    /// Checkpoints that copied frames so far, and the frames they copied (for tests).
    public var counts: (checkpoints: Int, frames: Int) { shared.state.withLock { ($0.checkpoints, $0.framesCopied) } }

    /// Stops the thread after its current checkpoint (if any) and closes its connection.
    public func stop() {
        let first = shared.state.withLock { state -> Bool in
            defer { state.stopped = true }
            return !state.stopped
        }
        guard first else { return }
        shared.wake.signal()
        shared.finished.wait()
    }

    /// Names the calling thread for `top -H` and `perf`.
    static func nameCurrentThread(_ name: String) {
        #if os(Linux)
        try? name.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
        #endif
    }

    /// The raw connection, used by the checkpoint thread only.
    private final class Connection: @unchecked Sendable {
        let handle: OpaquePointer
        init(handle: OpaquePointer) { self.handle = handle }
        func close() { sqlite3_close_v2(handle) }
    }
}

public struct CheckpointerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
