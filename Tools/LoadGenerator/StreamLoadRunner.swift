#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Histogram
import Synchronization

/// Runs the `stream` scenario: check the target, create the users, open the streams (RSS before
/// and after), make the changes at the asked rate, wait for their events, close, report.
/// Bounded: by `streams`, by `rate × duration` changes, by the open timeout and the drain.
public struct StreamLoadRunner: Sendable {
    /// The run's configuration, checked when `run` starts.
    public let configuration: StreamLoadConfiguration

    /// A runner for `configuration`; nothing is checked or sent until `run`.
    public init(_ configuration: StreamLoadConfiguration) {
        self.configuration = configuration
    }

    /// Runs to completion. Throws ``LoadError`` when the configuration or target is refused
    /// (before anything is sent) or when setup cannot create its users; what goes wrong with
    /// streams and changes is counted in the result.
    public func run(progress: @escaping @Sendable (String) -> Void = { _ in }) async throws -> StreamLoadResult {
        let config = configuration
        try config.validate()
        let target = try TargetGuard.check(url: config.url, allowRemote: config.allowRemote)
        raiseOpenFiles(to: config.streams + config.concurrency + 256)
        let client = try LoopHTTPClient.make(target: target, threads: config.threads, timeout: config.timeout, maxBody: Run.maxBody)
        let run = StreamRun()
        do {
            let result = try await execute(config, target: target, client: client, run: run, progress: progress)
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    private func execute(
        _ config: StreamLoadConfiguration, target: Target, client: LoopHTTPClient, run: StreamRun, progress: @Sendable (String) -> Void
    ) async throws -> StreamLoadResult {
        let clock = ContinuousClock()
        // 1. Users.
        progress("setup: creating \(config.streams) anonymous users")
        let setupStart = clock.now
        let tokens = try await parallel(config.streams, workers: config.concurrency, client: client) { n in
            try await Self.anonymousUser(client, n)
        }
        let setupSeconds = seconds(clock.now - setupStart)
        let rssBefore = config.gatewayPID.flatMap { residentKiB(pid: $0) }

        // 2. Streams, spread over the loops; each must deliver its snapshot.
        progress("opening \(config.streams) streams")
        let openStart = clock.now
        let requests = tokens.enumerated().map { (index: $0.offset, request: StreamRun.streamRequest(host: client.hostHeader, pathPrefix: client.pathPrefix, token: $0.element)) }
        await withTaskGroup(of: Void.self) { group in
            for (number, loop) in client.loops.enumerated() {
                let mine = requests.filter { $0.index % client.loops.count == number }
                group.addTask(executorPreference: loop.executor) {
                    loop.openStreams(mine, to: client.address, window: config.openWindow, sink: run)
                }
            }
        }
        let openDeadline = clock.now + .milliseconds(Int64(config.openTimeout * 1000))
        while run.state.withLock({ $0.settled }) < config.streams, clock.now < openDeadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let openSeconds = seconds(clock.now - openStart)
        let opened = run.state.withLock { $0.opened.sorted() }
        progress("\(opened.count) of \(config.streams) streams open in \(String(format: "%.2f", openSeconds)) s")
        var rssOpen: Int?
        if let pid = config.gatewayPID {
            try await Task.sleep(for: .seconds(1))  // let the gateway's allocations settle
            rssOpen = residentKiB(pid: pid)
        }

        // 3. Changes at the asked rate, round-robin over the users whose stream is open.
        var changeSeconds = 0.0
        if !opened.isEmpty {
            progress("changing settings at \(config.rate)/s for \(config.duration) s")
            let total = config.changeCount
            let tickets = Counter()
            let changeStart = clock.now
            let interval = 1.0 / config.rate
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<min(config.concurrency, total) {
                    group.addTask(executorPreference: client.executor(for: worker)) {
                        while true {
                            let k = tickets.next()
                            if k >= total { return }
                            let due = changeStart + .microseconds(Int64(Double(k) * interval * 1e6))
                            if due > clock.now { try? await Task.sleep(until: due, clock: clock) }
                            await Self.change(client, run, user: opened[k % opened.count], token: tokens[opened[k % opened.count]], value: k + 1)
                        }
                    }
                }
            }
            changeSeconds = seconds(clock.now - changeStart)
        }
        let rssAfter = config.gatewayPID.flatMap { residentKiB(pid: $0) }

        // 4. Drain: until every change made was delivered, or the drain time is up.
        let drainStart = clock.now
        let drainEnd = drainStart + .milliseconds(Int64(config.drain * 1000))
        while !run.state.withLock({ $0.accounting.caughtUp }), clock.now < drainEnd {
            try await Task.sleep(for: .milliseconds(20))
        }
        let drainSeconds = seconds(clock.now - drainStart)
        run.state.withLock { $0.closing = true }
        await withTaskGroup(of: Void.self) { group in
            for loop in client.loops { group.addTask(executorPreference: loop.executor) { loop.closeStreams() } }
        }

        let state = run.state.withLock { $0 }
        let perStream = rssBefore.flatMap { before in rssOpen.map { Double($0 - before) / Double(max(opened.count, 1)) } }
        return StreamLoadResult(
            url: target.baseURL, streams: config.streams, opened: opened.count, openFailures: state.openFailures,
            setupSeconds: (setupSeconds * 1000).rounded() / 1000, openSeconds: (openSeconds * 1000).rounded() / 1000,
            rate: config.rate, durationSeconds: config.duration, changesSent: state.changesSent, changesOK: state.changesOK,
            changeFailures: state.changeFailures, changeSeconds: (changeSeconds * 1000).rounded() / 1000,
            achievedRate: changeSeconds > 0 ? (Double(state.changesOK) / changeSeconds * 10).rounded() / 10 : 0,
            changeLatencyMs: LatencySummary(state.changeLatency), drainSeconds: (drainSeconds * 1000).rounded() / 1000,
            events: state.accounting.tally(), deliveryLatencyMs: LatencySummary(state.accounting.latency), heartbeats: state.heartbeats,
            closedByServer: state.closedByServer, droppedStreams: state.dropped, gatewayRSSBeforeKiB: rssBefore, gatewayRSSOpenKiB: rssOpen,
            gatewayRSSAfterKiB: rssAfter, gatewayKiBPerStream: perStream.map { ($0 * 10).rounded() / 10 })
    }

    /// One `PATCH /v1/me` setting `settings.n = value` for `user`; books it.
    private static func change(_ client: LoopHTTPClient, _ run: StreamRun, user: Int, token: String, value: Int) async {
        let start = ContinuousClock.now
        var failure: String?
        do {
            let response = try await client.execute(
                method: "PATCH", path: "/v1/me", headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                body: StreamRun.changeBody(value))
            if response.status != 200 { failure = String(response.status) }
        } catch let error as LoopHTTPClient.Failure {
            failure = error.kind.rawValue
        } catch {
            failure = "other"
        }
        let elapsed = micros(ContinuousClock.now - start)
        run.state.withLock { state in
            state.changesSent += 1
            if let failure {
                state.changeFailures[failure, default: 0] += 1
            } else {
                state.changesOK += 1
                state.changeLatency.record(min(max(elapsed, 1), state.changeLatency.highestTrackableValue))
                state.accounting.patched(user: user, value: value)
            }
        }
    }

    /// `POST /v1/accounts/anonymous`: the new user's access token (a few retries on 503/429 and transport errors).
    private static func anonymousUser(_ client: LoopHTTPClient, _ n: Int) async throws -> String {
        var last = ""
        for round in 0..<6 {
            do {
                let response = try await client.execute(method: "POST", path: "/v1/accounts/anonymous", headers: [("Accept", "application/json")], body: [])
                if response.status == 201 {
                    guard let json = try? JSONValue.parse(response.body), let token = json["session"]?["accessToken"]?.string, !token.isEmpty else {
                        throw LoadError.setupFailed("anonymous user \(n): the answer has no session.accessToken")
                    }
                    return token
                }
                last = "status \(response.status)"
                guard response.status == 503 || response.status == 429 else {
                    throw LoadError.setupFailed("anonymous user \(n): \(last) \(String(decoding: response.body.prefix(200), as: UTF8.self))")
                }
            } catch let error as LoopHTTPClient.Failure {
                last = error.description
            }
            try await Task.sleep(for: .milliseconds(50 * (1 << round)))
        }
        throw LoadError.setupFailed("anonymous user \(n): \(last)")
    }

    /// Runs `count` jobs with at most `workers` at once on the client's loops; results in index order.
    private func parallel<T: Sendable>(
        _ count: Int, workers: Int, client: LoopHTTPClient, _ job: @escaping @Sendable (Int) async throws -> T
    ) async throws -> [T] {
        let next = Counter()
        return try await withThrowingTaskGroup(of: [(Int, T)].self) { group in
            for worker in 0..<min(workers, count) {
                group.addTask(executorPreference: client.executor(for: worker)) {
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

    /// Raises the soft limit on open files to `count` (bounded by the hard limit).
    private func raiseOpenFiles(to count: Int) {
        var limit = rlimit()
        #if canImport(Glibc)
        let resource = Int32(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < rlim_t(count) else { return }
        limit.rlim_cur = min(rlim_t(count), limit.rlim_max)
        _ = setrlimit(resource, &limit)
    }
}
