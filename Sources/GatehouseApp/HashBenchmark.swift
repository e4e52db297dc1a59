import Foundation
import IdentityCore
import IdentityService
import Synchronization

/// How fast this machine hashes passwords with the configured Argon2id parameters: the ceiling
/// for sign-ups and sign-ins (`gatehouse hash-benchmark`). Operators use it to choose
/// `GATEHOUSE_ARGON2_*`; the load tests in BENCHMARKS.md use it as the ceiling measured beside
/// each sign-in and sign-up run.
///
/// Two figures, because Argon2id is memory-hard: one thread alone, and one thread per hashing
/// worker at once. On a small VM the parallel figure is below threads × the single one (the
/// hashes compete for memory bandwidth), and it is the one a full hashing pool can reach.
public struct HashBenchmark: Sendable {
    /// What a benchmark measured.
    public struct Result: Sendable, Equatable {
        /// The Argon2id parameters measured.
        public var parameters: Argon2Parameters
        /// How many threads hashed at once in the parallel phase.
        public var threads: Int
        /// Milliseconds per hash, one thread alone.
        public var singleThreadMs: Double
        /// Hashes per second with `threads` threads hashing at once.
        public var parallelPerSecond: Double

        /// The figures as a few lines for the operator.
        public var text: String {
            """
            Argon2id m=\(parameters.memoryKiB) KiB t=\(parameters.iterations) p=\(parameters.parallelism)
            one thread:        \(String(format: "%.1f", singleThreadMs)) ms per hash (\(String(format: "%.1f", 1000 / singleThreadMs))/s; × \(threads) threads = \(String(format: "%.1f", Double(threads) * 1000 / singleThreadMs))/s)
            \(threads) threads at once: \(String(format: "%.1f", parallelPerSecond)) hashes/s (the sign-in and sign-up ceiling)
            """
        }

        /// The figures as one JSON object (`gatehouse hash-benchmark --json`).
        public var json: String {
            String(format: #"{"memoryKiB":%d,"iterations":%d,"parallelism":%d,"threads":%d,"singleThreadMs":%.3f,"parallelPerSecond":%.2f}"#,
                   Int(parameters.memoryKiB), Int(parameters.iterations), Int(parameters.parallelism), threads, singleThreadMs, parallelPerSecond)
        }
    }

    /// The Argon2id parameters to measure (the configured ones).
    public var parameters: Argon2Parameters
    /// Threads of the parallel phase (the hashing workers); at least 1.
    public var threads: Int
    /// Measured time of each of the two phases.
    public var seconds: Double

    /// A benchmark of `parameters` on `threads` threads, each phase lasting `seconds`.
    public init(parameters: Argon2Parameters, threads: Int, seconds: Double) {
        self.parameters = parameters
        self.threads = max(1, threads)
        self.seconds = seconds
    }

    /// A benchmark of the identity role's configured hashing: its Argon2id parameters on its
    /// hashing workers, each phase lasting `seconds`.
    public init(settings: IdentityRoleSettings, seconds: Double) {
        self.init(parameters: settings.service.argon2, threads: settings.service.hashWorkers, seconds: seconds)
    }

    /// Runs both phases (about `2 × seconds`, plus a warm-up hash). Blocks the calling thread.
    public func run() throws -> Result {
        let password = Array("correct horse battery staple".utf8)
        _ = try PasswordHashing.argon2idHash(password, parameters: parameters)
        // One thread.
        var count = 0
        let start = ContinuousClock.now
        let end = start + .milliseconds(Int(seconds * 1000))
        repeat {
            _ = try PasswordHashing.argon2idHash(password, parameters: parameters)
            count += 1
        } while ContinuousClock.now < end
        let single = Self.seconds(ContinuousClock.now - start) * 1000 / Double(count)
        // Every thread at once, each until the deadline; the rate counts hashes that finished.
        let parameters = self.parameters
        let parallelEnd = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let parallelStart = ContinuousClock.now
        let tally = Mutex((hashes: 0, failed: false))
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            var done = 0
            repeat {
                guard (try? PasswordHashing.argon2idHash(password, parameters: parameters)) != nil else {
                    tally.withLock { $0.failed = true }
                    return
                }
                done += 1
            } while ContinuousClock.now < parallelEnd
            tally.withLock { $0.hashes += done }
        }
        let (hashes, failed) = tally.withLock { ($0.hashes, $0.failed) }
        if failed { throw HashBenchmarkError.hashFailed }
        let elapsed = Self.seconds(ContinuousClock.now - parallelStart)
        return Result(
            parameters: parameters, threads: threads, singleThreadMs: single, parallelPerSecond: Double(hashes) / elapsed)
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

/// Why `HashBenchmark.run()` failed.
public enum HashBenchmarkError: Error, CustomStringConvertible {
    case hashFailed
    /// One line for the operator.
    public var description: String { "Argon2id hashing failed with these parameters" }
}
