import Foundation
import Synchronization

/// One run's shared state. Counters are atomics; tallies sit behind one lock (recording is a few ns).
final class Run: Sendable {
    let config: LoadConfiguration
    let target: Target
    let engine: Engine
    let progress: @Sendable (String) -> Void
    let highestMicros: UInt64

    /// Measured requests claimed so far (for the request bound).
    let tickets = Atomic<Int>(0)
    /// Serial for fresh sign-up emails.
    let serial = Atomic<Int>(0)
    /// Round-robin cursor over the sign-in pool.
    let signinCursor = Atomic<Int>(0)
    let recoveries = Atomic<Int>(0)
    let renewals = Atomic<Int>(0)
    let tallies = Mutex<[Operation: OperationTally]>([:])
    let lastMeasuredEnd = Mutex<ContinuousClock.Instant?>(nil)
    let hitRequestBound = Atomic<Bool>(false)

    /// Users made during setup (sign-in pool, token owners).
    let pool = Mutex<[SetupUser]>([])
    /// Signs the `provider` scenario's ID tokens (parsed once).
    let providerSigner: ProviderSigner?
    /// Tokens of the `provider` scenario signed during setup (subject index, token), taken in
    /// order: the generator's own ES256 signing stays out of the measured phase, as a real
    /// client's token comes from the provider. Past them, tokens are signed on the fly.
    let presigned = Mutex<(tokens: [(Int, String)], next: Int)>(([], 0))

    init(config: LoadConfiguration, target: Target, engine: Engine, progress: @escaping @Sendable (String) -> Void) {
        self.config = config
        self.target = target
        self.engine = engine
        self.progress = progress
        self.highestMicros = max(60_000_000, UInt64(config.timeout * 1_000_000) + 1_000_000)
        self.providerSigner = config.providerKeyPEM.flatMap(ProviderSigner.init(pem:))
    }

    // MARK: Phases

    func execute() async throws -> LoadResult {
        let clock = ContinuousClock()
        let setupStart = clock.now
        let users = try await setup()
        let setupSeconds = seconds(clock.now - setupStart)
        if !users.pool.isEmpty {
            progress("setup: \(users.pool.count) users in \(String(format: "%.2f", setupSeconds)) s")
        }

        let warmupStart = clock.now
        let measureStart = warmupStart + .milliseconds(Int64(config.warmup * 1000))
        let measureEnd = measureStart + .milliseconds(Int64(config.duration * 1000))
        if config.warmup > 0 { progress("warmup: \(config.warmup) s (not recorded)") }

        await withTaskGroup(of: Void.self) { group in
            for index in 0..<config.concurrency {
                let state = VirtualUser(index: index, session: users.sessions.isEmpty ? nil : users.sessions[index % users.sessions.count],
                                        sessionObtained: setupStart)
                group.addTask(executorPreference: engine.executor(for: index)) {
                    await self.virtualUser(state, measureStart: measureStart, measureEnd: measureEnd, clock: clock)
                }
            }
        }
        let end = lastMeasuredEnd.withLock { $0 } ?? clock.now
        let elapsed = max(seconds(end - measureStart), 0)
        return result(elapsed: elapsed, setupUsers: users.pool.count, setupSeconds: setupSeconds)
    }

    /// What setup leaves for the measured phase.
    struct SetupState {
        var pool: [SetupUser] = []
        /// One session per virtual user (never shared: each rotates its own refresh token).
        var sessions: [SetupUser] = []
    }

    var operationsUsed: [Operation] {
        switch config.scenario {
        case .signup: return [.signup]
        case .signin: return [.signin]
        case .me: return [.me]
        case .refresh: return [.refresh]
        case .rawGet: return [.rawGet]
        case .provider: return [.provider]
        case .mixed: return config.mix.entries.map(\.0)
        case .stream: return []
        }
    }

    func setup() async throws -> SetupState {
        let used = Set(operationsUsed)
        if used.contains(.provider), let signer = providerSigner {
            // Enough for the run at 8,000 a second (bounded), signed before it starts.
            let count = min(config.maxRequests.map { $0 + 1000 } ?? Int((config.duration + config.warmup) * 8000), 200_000)
            progress("setup: signing \(count) provider tokens")
            let subjects = config.effectiveSetupUsers
            let tokens = (0..<count).map { n in
                (n % subjects, signer.idToken(subject: providerSubject(n % subjects), email: providerEmail(n % subjects), audience: config.providerAudience))
            }
            presigned.withLock { $0 = (tokens, 0) }
        }
        let needsPool = !used.isDisjoint(with: [.signin, .me, .refresh])
        guard needsPool else { return SetupState() }
        // me and refresh need one session per virtual user; sign-in only needs the pool.
        let needsSessions = !used.isDisjoint(with: [.me, .refresh])
        let poolSize = config.effectiveSetupUsers
        progress("setup: creating \(poolSize) users")

        let made = try await parallel(count: poolSize) { n in
            try await self.setupRequest("sign-up of user \(n)") {
                let email = "load-\(self.config.runID)-setup-\(n)@example.com"
                return await self.signUp(email: email)
            }
        }
        pool.withLock { $0 = made }
        var state = SetupState(pool: made)
        guard needsSessions else { return state }
        // The first sessions come from the sign-ups; more virtual users than users sign in again.
        let extra = max(config.concurrency - made.count, 0)
        let more = try await parallel(count: extra) { n in
            let user = made[(made.count + n) % made.count]
            return try await self.setupRequest("sign-in of \(user.email)") {
                await self.signIn(email: user.email)
            }
        }
        state.sessions = Array(made.prefix(config.concurrency)) + more
        return state
    }

    /// Runs `count` jobs with at most `concurrency` at once, in order of their index.
    func parallel<T: Sendable>(count: Int, _ job: @escaping @Sendable (Int) async throws -> T) async throws -> [T] {
        guard count > 0 else { return [] }
        let next = Counter()
        return try await withThrowingTaskGroup(of: [(Int, T)].self) { group in
            for worker in 0..<min(config.concurrency, count) {
                group.addTask(executorPreference: self.engine.executor(for: worker)) {
                    var done: [(Int, T)] = []
                    while true {
                        let n = next.next()
                        if n >= count { return done }
                        done.append((n, try await job(n)))
                    }
                }
            }
            var all: [(Int, T)] = []
            for try await part in group { all += part }
            return all.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    /// A setup step with a few retries for overload (503/429) and transport errors.
    func setupRequest<T: Sendable>(_ what: String, _ attempt: @Sendable () async -> Step<T>) async throws -> T {
        var last = ""
        for round in 0..<6 {
            let step = await attempt()
            switch step.outcome {
            case .success:
                if let value = step.value { return value }
                last = "no value"
            case .unexpectedStatus(let status) where status == 503 || status == 429:
                last = "status \(status)"
            case .transport(let kind, let detail):
                last = "\(kind): \(detail)"
            case .unexpectedStatus(let status):
                throw LoadError.setupFailed("\(what): status \(status) \(step.detail)")
            case .badBody(let reason):
                throw LoadError.setupFailed("\(what): bad body: \(reason)")
            }
            try await Task.sleep(for: .milliseconds(50 * (1 << round)))
        }
        throw LoadError.setupFailed("\(what): \(last)")
    }

    // MARK: Results

    func record(_ operation: Operation, _ outcome: RequestOutcome, micros: UInt64) {
        tallies.withLock { tallies in
            tallies[operation, default: OperationTally(highestMicros: highestMicros)].record(outcome, micros: micros)
        }
    }

    func result(elapsed: Double, setupUsers: Int, setupSeconds: Double) -> LoadResult {
        let perOperation = tallies.withLock { $0 }
        var all = OperationTally(highestMicros: highestMicros)
        var operations: [String: OperationResult] = [:]
        for (operation, tally) in perOperation where tally.total > 0 {
            all.merge(tally)
            operations[operation.rawValue] = tally.result(elapsed: elapsed)
        }
        let overall = all.result(elapsed: elapsed)
        return LoadResult(
            scenario: config.scenario.rawValue,
            url: target.baseURL,
            concurrency: config.concurrency,
            durationSeconds: config.duration,
            requestLimit: config.maxRequests,
            warmupSeconds: config.warmup,
            elapsedSeconds: (elapsed * 1000).rounded() / 1000,
            stoppedBy: hitRequestBound.load(ordering: .relaxed) ? "requests" : "duration",
            setupUsers: setupUsers,
            setupSeconds: (setupSeconds * 1000).rounded() / 1000,
            mix: config.scenario == .mixed ? config.mix.description : nil,
            sessionRecoveries: recoveries.load(ordering: .relaxed),
            sessionRenewals: renewals.load(ordering: .relaxed),
            totalRequests: overall.totalRequests,
            successfulRequests: overall.successfulRequests,
            failedRequests: overall.failedRequests,
            throughput: (overall.throughput * 10).rounded() / 10,
            latencyMs: overall.latencyMs,
            errorLatencyMs: overall.errorLatencyMs,
            errorsByStatus: overall.errorsByStatus,
            errorsByKind: overall.errorsByKind,
            errorSamples: overall.errorSamples,
            operations: operations
        )
    }
}

/// A shared counter handed out to tasks.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    /// Returns the current value and adds one.
    func next() -> Int { value.wrappingAdd(1, ordering: .relaxed).oldValue }
}

func micros(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    return UInt64(max(seconds, 0)) * 1_000_000 + UInt64(max(attoseconds, 0) / 1_000_000_000_000)
}

func seconds(_ duration: Duration) -> Double {
    let (whole, attoseconds) = duration.components
    return Double(whole) + Double(attoseconds) / 1e18
}
