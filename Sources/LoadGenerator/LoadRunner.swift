import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// Runs one load test: check the target, set up users, warm up, measure, report.
public struct LoadRunner: Sendable {
    public let configuration: LoadConfiguration

    public init(_ configuration: LoadConfiguration) {
        self.configuration = configuration
    }

    /// Runs to completion. Throws ``LoadError`` when the configuration or target is refused (before
    /// anything is sent) or when setup cannot create its users. Errors of measured requests are
    /// counted in the result, never thrown.
    public func run(progress: @escaping @Sendable (String) -> Void = { _ in }) async throws -> LoadResult {
        let config = configuration
        try config.validate()
        // The guard runs before any client or connection exists.
        let target = try TargetGuard.check(url: config.url, allowRemote: config.allowRemote)

        var clientConfig = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Int64(min(config.timeout, 10) * 1000)),
                           read: .milliseconds(Int64(config.timeout * 1000))),
            connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: config.concurrency),
            decompression: .disabled
        )
        clientConfig.httpVersion = .http1Only
        // A refused connection is an error to count, not something to hide behind retries.
        clientConfig.connectionPool.retryConnectionEstablishment = false
        // Pin a resolved name to the loopback address the guard saw (no second lookup to trust).
        if !config.allowRemote, !target.addresses.contains(target.host),
           let pinned = target.addresses.first(where: { !$0.contains(":") }) ?? target.addresses.first {
            clientConfig.dnsOverride = [target.host: pinned]
        }
        let engine: Engine
        switch config.engine {
        case .loop where target.baseURL.lowercased().hasPrefix("http://"):
            engine = .loop(try LoopHTTPClient.make(target: target, threads: config.threads, timeout: config.timeout, maxBody: Run.maxBody))
        case .nio where target.baseURL.lowercased().hasPrefix("http://"):
            engine = .lean(try LeanHTTPClient.make(
                target: target, group: MultiThreadedEventLoopGroup.singleton, timeout: config.timeout, maxBody: Run.maxBody))
        case .loop, .nio, .asyncHTTPClient:
            engine = .asyncHTTPClient(HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: clientConfig))
        }
        do {
            let result = try await Run(config: config, target: target, engine: engine, progress: progress).execute()
            await engine.shutdown()
            return result
        } catch {
            await engine.shutdown()
            throw error
        }
    }
}

/// The HTTP client a run uses.
enum Engine: Sendable {
    case asyncHTTPClient(HTTPClient)
    case lean(LeanHTTPClient)
    case loop(LoopHTTPClient)

    func shutdown() async {
        switch self {
        case .asyncHTTPClient(let client): try? await client.shutdown()
        case .lean(let client): await client.shutdown()
        case .loop(let client): await client.shutdown()
        }
    }

    /// Where virtual user `index` runs: on its loop thread with the `loop` engine (its requests
    /// then cross no thread), on Swift's pool otherwise.
    func executor(for index: Int) -> (any TaskExecutor)? {
        if case .loop(let client) = self { return client.executor(for: index) }
        return nil
    }
}

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

    init(config: LoadConfiguration, target: Target, engine: Engine, progress: @escaping @Sendable (String) -> Void) {
        self.config = config
        self.target = target
        self.engine = engine
        self.progress = progress
        self.highestMicros = max(60_000_000, UInt64(config.timeout * 1_000_000) + 1_000_000)
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
        case .mixed: return config.mix.entries.map(\.0)
        }
    }

    func setup() async throws -> SetupState {
        let used = Set(operationsUsed)
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

    // MARK: Virtual users

    struct VirtualUser {
        var index: Int
        /// The user's own session (me, refresh, mixed); nil when the session must be re-established.
        var session: SetupUser?
        var sessionBroken = false
        /// When the session's access token was issued (at the latest).
        var sessionObtained: ContinuousClock.Instant
        var generator = SystemRandomNumberGenerator()

        /// True when the access token is within its last 20% (at most 30 s) of life.
        func accessTokenDue(now: ContinuousClock.Instant) -> Bool {
            guard let lifetime = session?.session.expiresIn, lifetime > 0 else { return false }
            return seconds(now - sessionObtained) >= lifetime - min(30, lifetime * 0.2)
        }
    }

    func virtualUser(_ initial: VirtualUser, measureStart: ContinuousClock.Instant, measureEnd: ContinuousClock.Instant,
                     clock: ContinuousClock) async {
        var user = initial
        let operations = operationsUsed
        while !Task.isCancelled {
            if clock.now >= measureEnd { return }
            let operation: Operation
            if config.scenario == .mixed {
                operation = config.mix.pick(Int.random(in: 0..<config.mix.total, using: &user.generator))
            } else {
                operation = operations[0]
            }
            if operation == .me, user.accessTokenDue(now: clock.now) {
                // Long runs outlive access tokens: renew before they expire (not recorded).
                await renewSession(&user)
            }
            if operation == .refresh || operation == .me, user.sessionBroken {
                // Never present a refresh token whose fate is unknown: sign in again (not recorded).
                await recoverSession(&user)
                if user.sessionBroken {
                    try? await Task.sleep(for: .milliseconds(50))
                    continue
                }
            }
            let start = clock.now
            if start >= measureEnd { return }
            let measured = start >= measureStart
            if measured, let limit = config.maxRequests {
                // Claim a ticket for the request bound.
                let ticket = tickets.wrappingAdd(1, ordering: .relaxed).oldValue
                if ticket >= limit {
                    hitRequestBound.store(true, ordering: .relaxed)
                    return
                }
            }
            let outcome = await perform(operation, user: &user)
            let end = clock.now
            if measured {
                record(operation, outcome, micros: micros(end - start))
                lastMeasuredEnd.withLock { last in
                    if last.map({ $0 < end }) ?? true { last = end }
                }
            }
            if config.busyBackoff > 0, case .unexpectedStatus(let status) = outcome, status == 503 || status == 429 {
                // Back off like a client honouring Retry-After (not measured).
                try? await Task.sleep(for: .milliseconds(Int(config.busyBackoff * 1000)))
            }
        }
    }

    func recoverSession(_ user: inout VirtualUser) async {
        let made = pool.withLock { $0 }
        guard !made.isEmpty else { return }
        let email = made[user.index % made.count].email
        recoveries.wrappingAdd(1, ordering: .relaxed)
        let sent = ContinuousClock.now
        let step = await signIn(email: email)
        if let value = step.value {
            user.session = value
            user.sessionBroken = false
            user.sessionObtained = sent
        }
    }

    /// Rotates the user's session outside the measurements, to get a fresh access token.
    func renewSession(_ user: inout VirtualUser) async {
        guard !user.sessionBroken, let session = user.session else { return }
        renewals.wrappingAdd(1, ordering: .relaxed)
        let sent = ContinuousClock.now
        let step = await refresh(session.session.refreshToken)
        if let rotated = step.value {
            user.session?.session = rotated
            user.sessionObtained = sent
        } else {
            user.sessionBroken = true
        }
    }

    /// Sends one request of `operation` and checks it. Updates the user's session on refresh.
    func perform(_ operation: Operation, user: inout VirtualUser) async -> RequestOutcome {
        switch operation {
            case .signup:
                let n = serial.wrappingAdd(1, ordering: .relaxed).oldValue
                return await signUp(email: "load-\(config.runID)-\(n)@example.com").recorded(self, .signup)
            case .signin:
                let made = pool.withLock { $0 }
                let n = signinCursor.wrappingAdd(1, ordering: .relaxed).oldValue
                return await signIn(email: made[n % made.count].email).recorded(self, .signin)
            case .me:
                guard let session = user.session else { return .transport(kind: "no_session", detail: "no access token") }
                return await me(accessToken: session.session.accessToken, expectedID: session.id).recorded(self, .me)
            case .refresh:
                guard let session = user.session else { return .transport(kind: "no_session", detail: "no session") }
                let sent = ContinuousClock.now
                let step = await refresh(session.session.refreshToken)
                if let rotated = step.value {
                    user.session?.session = rotated
                    user.sessionObtained = sent
                } else {
                    // Failed or unknown: the presented token may be spent. Never send it again.
                    user.sessionBroken = true
                }
                return step.recorded(self, .refresh)
            case .rawGet:
                return await rawGet().recorded(self, .rawGet)
            }
    }

    // MARK: Requests

    /// The outcome of one request, with what a success yields.
    struct Step<Value: Sendable>: Sendable {
        var outcome: RequestOutcome
        var value: Value?
        /// Body excerpt for unexpected statuses.
        var detail: String = ""

        func recorded(_ run: Run, _ operation: Operation) -> RequestOutcome {
            if case .unexpectedStatus(let status) = outcome {
                run.tallies.withLock { tallies in
                    tallies[operation, default: OperationTally(highestMicros: run.highestMicros)].noteStatusSample(status, detail)
                }
            }
            return outcome
        }
    }

    struct Exchange {
        var status: Int
        var body: [UInt8]
    }

    static let maxBody = 1 << 20

    /// One HTTP exchange, or a classified transport failure.
    func send(_ method: HTTPMethod, _ path: String, json: KeyValuePairs<String, String>? = nil, bearer: String? = nil) async -> Result<Exchange, TransportFailure> {
        let body = json.map(Self.jsonObject)
        var headers: [(String, String)] = [("Accept", "application/json")]
        if let bearer { headers.append(("Authorization", "Bearer \(bearer)")) }
        if body != nil { headers.append(("Content-Type", "application/json")) }
        switch engine {
        case .loop(let client):
            do {
                let response = try await client.execute(method: method.rawValue, path: path, headers: headers, body: body)
                return .success(Exchange(status: response.status, body: response.body))
            } catch {
                return .failure(TransportFailure(error))
            }
        case .lean(let client):
            do {
                let response = try await client.execute(method: method.rawValue, path: path, headers: headers, body: body)
                return .success(Exchange(status: response.status, body: Array(response.body.readableBytesView)))
            } catch {
                return .failure(TransportFailure(error))
            }
        case .asyncHTTPClient(let client):
            var request = HTTPClientRequest(url: target.url(path))
            request.method = method
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
            do {
                let response = try await client.execute(request, timeout: .milliseconds(Int64(config.timeout * 1000)))
                let buffer = try await response.body.collect(upTo: Self.maxBody)
                return .success(Exchange(status: Int(response.status.code), body: Array(buffer.readableBytesView)))
            } catch {
                return .failure(TransportFailure(error))
            }
        }
    }

    /// A flat JSON object of strings, in the given order (the request bodies are all this shape).
    static func jsonObject(_ fields: KeyValuePairs<String, String>) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (index, (key, value)) in fields.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            appendJSONString(key, to: &out)
            out.append(UInt8(ascii: ":"))
            appendJSONString(value, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    static func appendJSONString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    func check<T: Sendable>(_ exchange: Result<Exchange, TransportFailure>, expect status: Int,
                  _ body: ([UInt8]) -> ResponseChecks.Outcome<T>) -> Step<T> {
        switch exchange {
        case .failure(let failure):
            return Step(outcome: .transport(kind: failure.kind, detail: failure.detail))
        case .success(let exchange) where exchange.status != status:
            let excerpt = String(decoding: exchange.body.prefix(300), as: UTF8.self)
            return Step(outcome: .unexpectedStatus(exchange.status), detail: excerpt)
        case .success(let exchange):
            switch body(exchange.body) {
            case .ok(let value): return Step(outcome: .success, value: value)
            case .bad(let reason): return Step(outcome: .badBody(reason))
            }
        }
    }

    func signUp(email: String) async -> Step<SetupUser> {
        let exchange = await send(.POST, "/v1/accounts", json: ["email": email, "password": config.password, "displayName": "Load Test"])
        return check(exchange, expect: 201) { ResponseChecks.checkAuth($0, email: email) }
    }

    func signIn(email: String) async -> Step<SetupUser> {
        let exchange = await send(.POST, "/v1/sessions", json: ["email": email, "password": config.password])
        return check(exchange, expect: 200) { ResponseChecks.checkAuth($0, email: email) }
    }

    func me(accessToken: String, expectedID: String) async -> Step<String> {
        let exchange = await send(.GET, "/v1/me", bearer: accessToken)
        return check(exchange, expect: 200) { ResponseChecks.checkMe($0, expectedID: expectedID) }
    }

    func refresh(_ token: String) async -> Step<SessionTokens> {
        let exchange = await send(.POST, "/v1/sessions/refresh", json: ["refreshToken": token])
        return check(exchange, expect: 200) { ResponseChecks.checkRefresh($0, presented: token) }
    }

    func rawGet() async -> Step<Bool> {
        let exchange = await send(.GET, config.path, bearer: config.bearer)
        return check(exchange, expect: 200) { _ in .ok(true) }
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

/// A request that got no usable response, by kind.
struct TransportFailure: Error {
    var kind: String
    var detail: String

    init(_ error: any Error) {
        detail = String(describing: error)
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout, .getConnectionFromPoolTimeout:
                kind = "timeout"
            case .remoteConnectionClosed:
                kind = "connection_closed"
            case .cancelled:
                kind = "cancelled"
            default:
                kind = "other"
            }
        } else if let failure = error as? LeanHTTPClient.Failure {
            kind = failure.kind.rawValue
        } else if let failure = error as? LoopHTTPClient.Failure {
            kind = failure.kind.rawValue
        } else if error is NIOTooManyBytesError {
            kind = "body_too_large"
        } else if let channelError = error as? ChannelError, case .connectTimeout = channelError {
            kind = "timeout"
        } else if error is NIOConnectionError {
            kind = "connect"
        } else if let io = error as? IOError {
            kind = [ECONNREFUSED, ECONNRESET, EHOSTUNREACH, ENETUNREACH].contains(io.errnoCode) ? "connect" : "io"
        } else if error is ChannelError {
            kind = "connection_closed"
        } else {
            kind = "other"
        }
    }
}

func micros(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    return UInt64(max(seconds, 0)) * 1_000_000 + UInt64(max(attoseconds, 0) / 1_000_000_000_000)
}

func seconds(_ duration: Duration) -> Double {
    let (whole, attoseconds) = duration.components
    return Double(whole) + Double(attoseconds) / 1e18
}
