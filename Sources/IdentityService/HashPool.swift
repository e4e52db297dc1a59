import Foundation
import GatehouseProtocol
import IdentityCore

/// A fixed set of threads for CPU- and memory-heavy work (password hashing), fed by a bounded
/// queue.
///
/// Async callers suspend on a continuation while a dedicated thread works, so hashing never
/// occupies a thread of Swift's cooperative pool. A burst queues; once `queueLimit` jobs are
/// waiting, `run` fails at once with `IdentityError.overloaded` instead of piling up memory
/// (each Argon2 job holds `m` KiB while it runs, so memory is bounded by `workers × m`).
public final class HashPool: Sendable {
    /// The number of worker threads.
    public let workers: Int
    /// The most jobs that may wait for a worker.
    public let queueLimit: Int
    private let state: State

    /// Starts `workers` threads (the number of active cores by default).
    public init(workers: Int = ProcessInfo.processInfo.activeProcessorCount, queueLimit: Int = 64) {
        self.workers = max(1, workers)
        self.queueLimit = max(0, queueLimit)
        self.state = State(queueLimit: self.queueLimit)
        for index in 0..<self.workers {
            let state = self.state
            let thread = Thread {
                ThreadName.set("idhash-\(index)")
                state.workerLoop()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    deinit { state.stop() }

    /// The calling thread's name (from the pthread on Linux).
    public static func currentThreadName() -> String { ThreadName.current }

    /// Runs `work` on a worker thread and returns its result. Throws `IdentityError.overloaded`
    /// without waiting when the queue is full or the pool is shut down.
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let accepted = state.enqueue {
                let result = Result { try work() }
                // Resumed after the pool's counters are updated, so a caller sees them current.
                return { continuation.resume(with: result) }
            }
            if !accepted { continuation.resume(throwing: IdentityError.overloaded) }
        }
    }

    /// The pool's counters, read together.
    public struct Snapshot: Sendable, Hashable {
        /// Jobs waiting for a worker.
        public var queued: Int
        /// Workers running a job.
        public var running: Int
        /// Jobs finished since the pool started.
        public var completed: Int
        /// Jobs refused (`overloaded`) since the pool started.
        public var rejected: Int
    }

    /// The pool's counters, read under one lock.
    public var snapshot: Snapshot { state.snapshot() }
    /// Jobs waiting for a worker (a metric).
    public var queueDepth: Int { state.snapshot().queued }
    /// Workers currently running a job (a metric).
    public var busyWorkers: Int { state.snapshot().running }
    /// Jobs finished since the pool started (a metric).
    public var completedJobs: Int { state.snapshot().completed }

    /// Stops the threads once the queue is drained; later `run` calls fail with `overloaded`.
    public func shutdown() { state.stop() }

    private final class State: @unchecked Sendable {
        // Guarded by `condition`.
        private let condition = NSCondition()
        private var jobs: [Job] = []
        private var head = 0
        private var running = 0
        private var completed = 0
        private var rejected = 0
        private var stopped = false
        private let queueLimit: Int

        /// Does the work and returns what completes its caller.
        typealias Job = @Sendable () -> (@Sendable () -> Void)

        init(queueLimit: Int) { self.queueLimit = queueLimit }

        func enqueue(_ job: @escaping Job) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            guard !stopped, jobs.count - head < queueLimit else {
                rejected += 1
                return false
            }
            jobs.append(job)
            condition.signal()
            return true
        }

        func snapshot() -> Snapshot {
            condition.lock()
            defer { condition.unlock() }
            return Snapshot(queued: jobs.count - head, running: running, completed: completed, rejected: rejected)
        }

        func stop() {
            condition.lock()
            stopped = true
            condition.broadcast()
            condition.unlock()
        }

        func workerLoop() {
            while true {
                condition.lock()
                while jobs.count == head && !stopped { condition.wait() }
                if jobs.count == head {  // stopped and drained
                    condition.unlock()
                    return
                }
                let job = jobs[head]
                head += 1
                if head >= 64 && head * 2 >= jobs.count {
                    jobs.removeFirst(head)
                    head = 0
                }
                running += 1
                condition.unlock()
                let finish = job()
                condition.lock()
                running -= 1
                completed += 1
                condition.unlock()
                finish()
            }
        }
    }
}
