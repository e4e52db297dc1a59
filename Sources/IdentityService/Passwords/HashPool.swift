import Foundation
import IdentityPorts
import GatehouseContracts
import IdentityCore
import GatehouseSupport

/// A fixed set of threads for CPU- and memory-heavy work (password hashing), fed by a bounded
/// queue.
///
/// Async callers suspend on a continuation while a dedicated thread works, so hashing never
/// occupies a thread of Swift's cooperative pool. A burst queues; once `queueLimit` jobs are
/// waiting, `run` fails at once with `IdentityError.overloaded` instead of piling up memory
/// (each Argon2 job holds `m` KiB while it runs, so memory is bounded by `workers × m`).
///
/// A job may carry its caller's deadline. Work finished after it is wasted (the caller has
/// already been told the service is unavailable), and under a storm of clients that retry at once
/// such waste took nearly all of the pool: 4.6 successful sign-ins/s of ~70 possible. So a job
/// that cannot finish in time is refused at once (its expected wait, from the jobs ahead of it
/// and a moving average of job times, ends past the deadline), and a queued job whose deadline
/// can no longer be met when a worker reaches it is skipped; both fail with `overloaded`.
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
        self.state = State(queueLimit: self.queueLimit, workers: self.workers)
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
    /// without waiting when the queue is full, the pool is shut down, or the job would not finish
    /// before `deadline`; and after waiting, when a worker reaches it too late to finish in time.
    public func run<T: Sendable>(deadline: ContinuousClock.Instant? = nil, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let accepted = state.enqueue(Job(
                deadline: deadline,
                run: {
                    let result = Result { try work() }
                    // Resumed after the pool's counters are updated, so a caller sees them current.
                    return { continuation.resume(with: result) }
                },
                expire: { continuation.resume(throwing: IdentityError.overloaded) }))
            if !accepted { continuation.resume(throwing: IdentityError.overloaded) }
        }
    }

    /// A queued job: `run` does the work and returns what completes its caller; `expire` fails
    /// the caller when the job is skipped.
    struct Job: Sendable {
        var deadline: ContinuousClock.Instant?
        var run: @Sendable () -> (@Sendable () -> Void)
        var expire: @Sendable () -> Void
    }

    /// The pool's counters, read together.
    public struct Snapshot: Sendable, Hashable {
        /// Jobs waiting for a worker.
        public var queued: Int
        /// Workers running a job.
        public var running: Int
        /// Jobs finished since the pool started.
        public var completed: Int
        /// Jobs refused (`overloaded`) since the pool started: queue full, deadline out of
        /// reach when queued, or skipped when reached too late.
        public var rejected: Int
        /// Moving average of a job's time on a worker (zero until one has run).
        public var averageJob: Duration
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
        /// Moving average of a job's duration in nanoseconds (0: none has run yet).
        private var averageNanos: Double = 0
        private let queueLimit: Int
        private let workers: Int

        init(queueLimit: Int, workers: Int) {
            self.queueLimit = queueLimit
            self.workers = workers
        }

        func enqueue(_ job: Job) -> Bool {
            condition.lock()
            defer { condition.unlock() }
            guard !stopped, jobs.count - head < queueLimit, !Self.tooLate(job, waitingAhead: jobs.count - head, running: running,
                                                                         workers: workers, averageNanos: averageNanos) else {
                rejected += 1
                return false
            }
            jobs.append(job)
            condition.signal()
            return true
        }

        /// Whether a job with `waitingAhead` jobs before it (and `running` jobs on the workers,
        /// on average half done) would end past its deadline.
        static func tooLate(_ job: Job, waitingAhead: Int, running: Int, workers: Int, averageNanos: Double,
                            now: ContinuousClock.Instant = .now) -> Bool {
            guard let deadline = job.deadline else { return false }
            let rounds = (Double(waitingAhead) + Double(running) / 2) / Double(workers) + 1
            return now + .nanoseconds(Int64(rounds * averageNanos)) > deadline
        }

        func snapshot() -> Snapshot {
            condition.lock()
            defer { condition.unlock() }
            return Snapshot(
                queued: jobs.count - head, running: running, completed: completed, rejected: rejected,
                averageJob: .nanoseconds(Int64(averageNanos)))
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
                // Reached too late to finish in time: skip it rather than work for nobody.
                if Self.tooLate(job, waitingAhead: 0, running: 0, workers: 1, averageNanos: averageNanos) {
                    rejected += 1
                    condition.unlock()
                    job.expire()
                    continue
                }
                running += 1
                condition.unlock()
                let start = ContinuousClock.now
                let finish = job.run()
                let elapsed = ContinuousClock.now - start
                let nanos = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
                condition.lock()
                running -= 1
                completed += 1
                averageNanos = averageNanos == 0 ? nanos : averageNanos * 0.8 + nanos * 0.2
                condition.unlock()
                finish()
            }
        }
    }
}
