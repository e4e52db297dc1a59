import Logging
import PostgresNIO
import Synchronization

/// Whether a PostgreSQL database answers, so that calls fail fast while it does not.
///
/// postgres-nio's pool keeps a request for a connection waiting while it cannot connect (up to
/// its circuit breaker, a minute later): with the database down, every call would hang past its
/// caller's deadline, and run later for nobody (a refresh nobody receives, then a retry taken
/// for reuse). A store runs each call through `run` instead:
///
/// - The call runs in a task of its own, registered while it waits for a connection. A watchdog
///   (every `stallAfter / 5`) finds calls waiting longer than `stallAfter` while no call
///   succeeded for as long: the database is **down**. Those calls are cancelled (the pool drops
///   their requests) and fail `unavailable`; so does a call that fails for want of the database.
/// - While down, calls fail at once with no attempt, and one probe (`SELECT 1`, with its own
///   time limit) runs every `probeInterval`; the first that succeeds marks the database **up**.
///
/// A busy pool is not taken for a dead database: while calls keep succeeding, a long wait for a
/// connection is only load.
public final class DatabaseHealth: Sendable {
    private struct State {
        var waiting: [UInt64: (since: ContinuousClock.Instant, cancel: (@Sendable () -> Void)?)] = [:]
        var next: UInt64 = 0
        var lastSuccess = ContinuousClock.now
        var probing = false
        var watching = false
        /// Calls the watchdog cancelled (they fail `Unavailable`, whatever the pool says).
        var stalled: Set<UInt64> = []
    }

    /// A call failed because the database was found down (`run` throws it; the store says `unavailable`).
    public struct Unavailable: Error {}

    private let state = Mutex(State())
    private let down = Atomic<Bool>(false)
    let client: PostgresClient
    let name: String
    let logger: Logger
    /// How long a wait for a connection, with no call succeeding meanwhile, means the database is down.
    public let stallAfter: Duration
    /// How often a probe runs while the database is down.
    public let probeInterval: Duration

    /// Health of the database `client` reaches, named `name` in logs ("token").
    public init(
        client: PostgresClient, name: String, logger: Logger, stallAfter: Duration = .milliseconds(750),
        probeInterval: Duration = .milliseconds(200)
    ) {
        self.client = client
        self.name = name
        self.logger = logger
        self.stallAfter = stallAfter
        self.probeInterval = probeInterval
    }

    /// Whether calls fail at once.
    public var isDown: Bool { down.load(ordering: .acquiring) }

    /// Runs `body` on a pooled connection (see the type). Throws `Unavailable` while the database
    /// is down, or when this call was cancelled because it was found down; `body`'s and the pool's
    /// other errors pass through (a connection failure also marks the database down).
    public func run<T: Sendable>(
        _ isUnavailable: (any Error) -> Bool, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        guard !isDown else { throw Unavailable() }
        let ticket = register()
        let client = self.client
        let task = Task { [weak self] in
            try await client.withConnection { connection in
                self?.connected(ticket)
                return try await body(connection)
            }
        }
        attach(ticket) { task.cancel() }
        do {
            let result = try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
            finished(ticket, succeeded: true)
            return result
        } catch {
            if finished(ticket, succeeded: false) { throw Unavailable() }
            if isDown, error is CancellationError || isUnavailable(error) { throw Unavailable() }
            if isUnavailable(error) {
                markDown(because: "\(type(of: error))")
                throw Unavailable()
            }
            throw error
        }
    }

    private func register() -> UInt64 {
        let (ticket, start) = state.withLock { state -> (UInt64, Bool) in
            state.next &+= 1
            state.waiting[state.next] = (.now, nil)
            defer { state.watching = true }
            return (state.next, !state.watching)
        }
        if start {
            // Holds the health only while it looks: it ends with its owner.
            Task { [weak self] in
                while true {
                    guard let pause = self.map({ $0.stallAfter / 5 }) else { return }
                    try? await Task.sleep(for: pause)
                    guard let self else { return }
                    self.look()
                }
            }
        }
        return ticket
    }

    private func attach(_ ticket: UInt64, cancel: @escaping @Sendable () -> Void) {
        state.withLock { state in
            if let entry = state.waiting[ticket] { state.waiting[ticket] = (entry.since, cancel) }
        }
    }

    private func connected(_ ticket: UInt64) {
        state.withLock { _ = $0.waiting.removeValue(forKey: ticket) }
    }

    /// Whether the watchdog cancelled the call.
    @discardableResult
    private func finished(_ ticket: UInt64, succeeded: Bool) -> Bool {
        state.withLock { state in
            state.waiting.removeValue(forKey: ticket)
            if succeeded { state.lastSuccess = .now }
            return state.stalled.remove(ticket) != nil
        }
    }

    /// Every `stallAfter / 5` once calls are made: cancels the calls stalled on a dead database.
    private func look() {
        do {
            let now = ContinuousClock.now
            let stalled = state.withLock { state -> [@Sendable () -> Void]? in
                guard state.lastSuccess.duration(to: now) > stallAfter,
                    state.waiting.values.contains(where: { $0.since.duration(to: now) > stallAfter })
                else { return nil }
                let cancels = state.waiting.values.compactMap(\.cancel)
                state.stalled.formUnion(state.waiting.keys)
                state.waiting = [:]
                return cancels
            }
            if let stalled {
                markDown(because: "no connection for \(stallAfter)")
                for cancel in stalled { cancel() }
            }
        }
    }

    /// A call failed for want of the database: calls fail at once until a probe succeeds.
    public func markDown(because reason: String) {
        let startProbe = state.withLock { state -> Bool in
            if state.probing { return false }
            state.probing = true
            return true
        }
        down.store(true, ordering: .releasing)
        guard startProbe else { return }
        logger.warning("the \(name) database is unavailable (\(reason)); calls fail at once until it answers again")
        Task { await self.probe() }
    }

    private func probe() async {
        while true {
            try? await Task.sleep(for: probeInterval)
            let answered = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    (try? await self.client.withConnection { connection in
                        try await connection.query("SELECT 1", logger: Self.silent).collect()
                    }) != nil
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(2))
                    return false
                }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
            if answered { break }
        }
        state.withLock { state in
            state.probing = false
            state.lastSuccess = .now
        }
        down.store(false, ordering: .releasing)
        logger.notice("the \(name) database answers again")
    }

    private static let silent = Logger(label: "gatehouse.postgres.probe", factory: { _ in SwiftLogNoOpLogHandler() })
}
