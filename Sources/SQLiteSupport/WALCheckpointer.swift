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
/// writer or readers. Under steady writes it never quite reaches the end of the WAL, though, and
/// SQLite starts the WAL over only once every frame is copied back; so when the WAL has grown
/// past `restartFrames`, a RESTART checkpoint copies the last few frames while holding writers
/// off for that moment, and the next commit writes the WAL from its beginning again.
///
/// Durability is unchanged: a commit is as durable as it was (WAL written before the commit
/// returns, fsynced with `synchronous = FULL`); the checkpoint only moves committed pages.
public final class WALCheckpointer: Sendable {
    /// WAL frames (4 KiB pages) past which a checkpoint starts the WAL over (see `init`).
    public static let defaultRestartFrames: Int32 = 65_536

    /// The size a WAL file is cut back to after it starts over: above what a restart at
    /// `defaultRestartFrames` leaves (65,536 frames of 4,120 bytes, plus those written during the
    /// passes just before it), so no commit ever truncates a large log. Cutting a 256 MiB log back
    /// to 64 MiB stalled the first commit after each restart for 265–278 ms.
    public static let journalSizeLimit = 288 << 20

    /// The settings a store applies to each of its connections when it uses a checkpointer: no
    /// automatic checkpoint in commits, and a WAL cut back only past `journalSizeLimit`.
    public static let connectionPragmas = [
        "PRAGMA wal_autocheckpoint = 0", "PRAGMA journal_size_limit = \(journalSizeLimit)",
        // Pages of the database file read through a memory map (256 MiB at most) instead of a
        // pread(2) each: the token table outgrows a connection's 2 MiB page cache within minutes
        // of refreshes, and each miss was a system call on the hot path. (Not for the token
        // service's look-ups: see `RawReadPool.memoryMapSize`.)
        "PRAGMA mmap_size = \(RawReadPool.mmapSize)",
    ]

    /// What the thread uses; the thread holds this, not the checkpointer, so dropping the
    /// checkpointer (its store) stops the thread.
    private final class Shared: Sendable {
        struct Counts {
            var stopped = false
            var checkpoints = 0
            var framesCopied = 0
            var restarts = 0
        }
        let state = Mutex(Counts())
        let wake = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let interval: Duration
        let restartFrames: Int32

        init(interval: Duration, restartFrames: Int32) {
            self.interval = interval
            self.restartFrames = restartFrames
        }

        func run(_ connection: Connection) {
            let nanos = interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
            while true {
                _ = wake.wait(timeout: .now() + .nanoseconds(Int(nanos)))
                if state.withLock({ $0.stopped }) { return }
                var logFrames: Int32 = 0
                var copied: Int32 = 0
                var code = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &copied)
                // Under a steady stream of commits a PASSIVE checkpoint never quite catches up
                // with the end of the WAL, and only a fully copied WAL is started over: the file
                // would grow without bound. Past `restartFrames`, a RESTART checkpoint finishes
                // the copy while holding off writers (briefly: the PASSIVE one just copied all
                // but the last few frames) and makes the next commit start the WAL over.
                if code == SQLITE_OK, logFrames > restartFrames {
                    // The restart holds writers off while it copies what is left and fsyncs
                    // the database, and the fsync takes about as long as the pages it has to
                    // write (tens of ms for a few hundred on this VM's disk). So first let a few
                    // more PASSIVE passes copy the frames that arrived during the last one,
                    // until a pass finds little new, then restart with only that little left.
                    var previous = copied
                    for _ in 0..<4 {
                        code = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &copied)
                        if code != SQLITE_OK || copied - previous < 64 { break }
                        previous = copied
                    }
                    if code == SQLITE_OK {
                        code = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_RESTART, &logFrames, &copied)
                        if code == SQLITE_OK { state.withLock { $0.restarts += 1 } }
                    }
                }
                // SQLITE_BUSY (a writer or reader held on past the busy timeout): tried again next time.
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
    /// How often the thread checkpoints.
    public var interval: Duration { shared.interval }

    /// Opens a connection to the database at `path` (which must already be in WAL mode) and
    /// starts checkpointing every `interval`; when the WAL holds more than `restartFrames`
    /// frames (4 KiB pages) after a checkpoint, it is started over.
    ///
    /// A restart holds writers off for its last copy and fsync (mostly 4–10 ms, up to ~40 ms on
    /// this VM's disk under load), and every write in flight waits it out, so how often restarts
    /// come sets the latency tail. Measured over HTTP at ~6,700 refreshes/s, 30 s runs: every
    /// 16,000 frames, p99 16.8–18.3 ms and p99.9 48–62 ms; every 65,536 frames (the default),
    /// p99 16.2–16.4 ms and p99.9 23–24 ms, at the same throughput. The price is disk: under
    /// sustained writes the WAL file reaches about 270 MiB and keeps that size
    /// (`journalSizeLimit`); under light load a PASSIVE pass catches up, SQLite starts the WAL
    /// over itself, and the file stays small.
    ///
    /// `onThreadStart` runs first on the checkpoint thread (the services name it there).
    public init(
        path: String, interval: Duration = .milliseconds(100), restartFrames: Int32 = WALCheckpointer.defaultRestartFrames,
        onThreadStart: @escaping @Sendable () -> Void = {}
    ) throws {
        shared = Shared(interval: interval, restartFrames: restartFrames)
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "code \(code)"
            sqlite3_close_v2(handle)
            throw CheckpointerError(message: "cannot open \(path) for checkpoints: \(message)")
        }
        // A RESTART checkpoint holds the writer lock while it waits for readers to leave the
        // WAL, and SQLite's default busy handler sleeps 1, 2, 5, 10… ms between tries: commits
        // would stall that long. Reads and commits here take microseconds, so retry every 50 µs,
        // and give up (until the next tick) after about 20 ms.
        sqlite3_busy_handler(handle, { _, attempts in
            guard attempts < 400 else { return 0 }
            usleep(50)
            return 1
        }, nil)
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
            onThreadStart()
            shared.run(connection)
            connection.close()
            shared.finished.signal()
        }
        thread.stackSize = 256 << 10
        thread.start()
    }

    deinit { stop() }

    /// Checkpoints that copied frames so far, the frames they copied, and the times the WAL was
    /// started over (for tests).
    public var counts: (checkpoints: Int, frames: Int, restarts: Int) {
        shared.state.withLock { ($0.checkpoints, $0.framesCopied, $0.restarts) }
    }

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

    /// The raw connection, used by the checkpoint thread only.
    private final class Connection: @unchecked Sendable {
        let handle: OpaquePointer
        init(handle: OpaquePointer) { self.handle = handle }
        func close() { sqlite3_close_v2(handle) }
    }
}

/// Why a checkpointer could not start: its connection did not open or could not read the database.
public struct CheckpointerError: Error, CustomStringConvertible {
    /// What failed, with the path and SQLite's message.
    public var message: String
    /// The message.
    public var description: String { message }
}
