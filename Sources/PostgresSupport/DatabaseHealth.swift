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
/// - The call runs in a task of its own, registered while it waits for a connection and while it
///   runs. A watchdog (every `stallAfter / 5`) finds calls waiting longer than `stallAfter` while
///   none got a connection or succeeded for as long: the database is **down**. Every call then
///   waiting or running is cancelled (the pool drops their requests; one that gets a connection
///   meanwhile refuses to run; one stuck on a connection the crash left hanging is abandoned) and
///   fails `Unavailable`; so does a call that fails for want of a connection.
/// - A call whose connection closes under it and has not ended `closedGrace` later is given up
///   (`Unavailable`): a statement written to a connection already closed is never answered.
/// - While down, calls fail at once with no attempt, and one probe (`SELECT 1`, with its own
///   time limit) runs every `probeInterval`; the first that succeeds marks the database **up**.
///
/// A busy pool is not taken for a dead database: while calls run or keep succeeding, a long wait
/// for a connection is only load. Server errors of one statement (a deadlock, a lock or statement
/// time-out) are that statement's, and pass through.
public final class DatabaseHealth: Sendable {
    private enum Ticket {
        case waiting(since: ContinuousClock.Instant, cancel: (@Sendable () -> Void)?)
        case running(since: ContinuousClock.Instant, cancel: (@Sendable () -> Void)?, connection: PostgresConnection.ID)
        /// Cancelled by the watchdog: it fails `Unavailable`, and never runs its statements.
        case stalled
    }

    private struct State {
        var tickets: [UInt64: Ticket] = [:]
        var next: UInt64 = 0
        var lastSuccess = ContinuousClock.now
        var down = false
        var probing = false
        var watching = false
        /// The connections whose close is watched (one callback each, however many calls they serve).
        var watchedConnections: Set<PostgresConnection.ID> = []
    }

    /// A call failed because the database was found down (`run` throws it; the store says `unavailable`).
    public struct Unavailable: Error {}

    private let state = Mutex(State())
    /// `state.down`, for the check each call makes without the lock (written under it).
    private let downFlag = Atomic<Bool>(false)
    let client: PostgresClient
    let name: String
    let logger: Logger
    /// How long a wait for a connection, with nothing running or succeeding meanwhile, means the
    /// database is down.
    public let stallAfter: Duration
    /// How often a probe runs while the database is down.
    public let probeInterval: Duration
    /// How long a call may go on after its connection closed before it is given up.
    public let closedGrace: Duration

    /// Health of the database `client` reaches, named `name` in logs ("token").
    public init(
        client: PostgresClient, name: String, logger: Logger, stallAfter: Duration = .milliseconds(1500),
        probeInterval: Duration = .milliseconds(200), closedGrace: Duration = .milliseconds(250)
    ) {
        self.client = client
        self.name = name
        self.logger = logger
        self.stallAfter = stallAfter
        self.probeInterval = probeInterval
        self.closedGrace = closedGrace
    }

    /// Whether calls fail at once.
    public var isDown: Bool { downFlag.load(ordering: .acquiring) }

    /// Runs `body` on a pooled connection (see the type). Throws `Unavailable` while the database
    /// is down, when this call was cancelled because it was found down, or when it failed for
    /// want of a connection (`isConnectionFailure`, which also marks the database down); `body`'s
    /// other errors pass through.
    public func run<T: Sendable>(
        _ isConnectionFailure: @escaping @Sendable (any Error) -> Bool, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        guard !isDown else { throw Unavailable() }
        let ticket = register()
        let client = self.client
        let outcome = FirstOutcome<T>()
        let task = Task { [weak self] in
            do {
                let value = try await client.withConnection { connection in
                    // Found down while it waited: it runs nothing.
                    guard self?.connected(ticket, on: connection) ?? true else { throw Unavailable() }
                    return try await body(connection)
                }
                outcome.finish(.success(value))
            } catch {
                outcome.finish(.failure(error))
            }
        }
        // The watchdog's way to give the call up: cancel its task, and answer now (a query stuck
        // on a connection the crash left hanging may never return).
        attach(ticket) {
            task.cancel()
            outcome.finish(.failure(Unavailable()))
        }
        let result = await withTaskCancellationHandler {
            await outcome.value()
        } onCancel: {
            task.cancel()
        }
        switch result {
        case .success(let value):
            finished(ticket, succeeded: true)
            return value
        case .failure(let error):
            if finished(ticket, succeeded: false) || error is Unavailable { throw Unavailable() }
            if isConnectionFailure(error) {
                markDown(because: "\(type(of: error))")
                throw Unavailable()
            }
            throw error
        }
    }

    private func register() -> UInt64 {
        let (ticket, start) = state.withLock { state -> (UInt64, Bool) in
            state.next &+= 1
            state.tickets[state.next] = .waiting(since: .now, cancel: nil)
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

    /// Gives the waiting call `ticket` its cancel handle; one found stalled already is cancelled now.
    private func attach(_ ticket: UInt64, cancel: @escaping @Sendable () -> Void) {
        let stalled = state.withLock { state -> Bool in
            switch state.tickets[ticket] {
            case .waiting(let since, _):
                state.tickets[ticket] = .waiting(since: since, cancel: cancel)
                return false
            case .running(let since, _, let connection):
                state.tickets[ticket] = .running(since: since, cancel: cancel, connection: connection)
                return false
            case .stalled: return true
            default: return false
            }
        }
        if stalled { cancel() }
    }

    /// The call has its connection; false when the watchdog gave it up meanwhile (it must not run).
    ///
    /// Calls whose connection closes under them are given up `closedGrace` later if they have
    /// not ended by then. The pool can hand out a connection the crash has just closed (before it
    /// learns of the close), and postgres-nio then drops a statement written to it without
    /// failing it: the call would wait forever, past every deadline. Each connection's close is
    /// watched once, the first time a call gets it.
    private func connected(_ ticket: UInt64, on connection: PostgresConnection) -> Bool {
        let id = connection.id
        let (running, watch) = state.withLock { state -> (Bool, Bool) in
            guard case .waiting(_, let cancel) = state.tickets[ticket] else { return (false, false) }
            state.tickets[ticket] = .running(since: .now, cancel: cancel, connection: id)
            return (true, state.watchedConnections.insert(id).inserted)
        }
        guard running else { return false }
        if watch {
            let grace = closedGrace
            connection.closeFuture.whenComplete { [weak self] _ in
                Task { [weak self] in
                    try? await Task.sleep(for: grace)
                    self?.abandonCalls(on: id)
                }
            }
        }
        return true
    }

    /// Gives up the calls still running on the connection `id` (closed `closedGrace` ago).
    private func abandonCalls(on id: PostgresConnection.ID) {
        let cancels = state.withLock { state -> [@Sendable () -> Void] in
            state.watchedConnections.remove(id)
            var cancels: [@Sendable () -> Void] = []
            for (ticket, value) in state.tickets {
                guard case .running(_, let cancel, let connection) = value, connection == id else { continue }
                state.tickets[ticket] = .stalled
                if let cancel { cancels.append(cancel) }
            }
            return cancels
        }
        guard !cancels.isEmpty else { return }
        logger.warning("\(cancels.count) \(name) database call(s) left waiting on a closed connection; given up")
        for cancel in cancels { cancel() }
    }

    /// Whether the watchdog gave the call up.
    @discardableResult
    private func finished(_ ticket: UInt64, succeeded: Bool) -> Bool {
        state.withLock { state in
            let ticketState = state.tickets.removeValue(forKey: ticket)
            if succeeded { state.lastSuccess = .now }
            if case .stalled = ticketState { return true }
            return false
        }
    }

    /// Every `stallAfter / 5` once calls are made: gives up the calls stalled on a dead database.
    private func look() {
        let now = ContinuousClock.now
        let cancels = state.withLock { state -> [@Sendable () -> Void]? in
            guard state.lastSuccess.duration(to: now) > stallAfter else { return nil }
            // A call that got its connection lately shows the database alive (the pool is busy).
            var stalled = false
            for ticket in state.tickets.values {
                switch ticket {
                case .running(let since, _, _) where since.duration(to: now) <= stallAfter: return nil
                case .waiting(let since, _) where since.duration(to: now) > stallAfter: stalled = true
                default: break
                }
            }
            guard stalled else { return nil }
            // Down: every call waiting, and every call stuck on its connection as long (a
            // connection the crash left hanging), is given up.
            var cancels: [@Sendable () -> Void] = []
            for (id, ticket) in state.tickets {
                switch ticket {
                case .waiting(_, let cancel), .running(_, let cancel, _):
                    state.tickets[id] = .stalled
                    if let cancel { cancels.append(cancel) }
                case .stalled: break
                }
            }
            return cancels
        }
        guard let cancels else { return }
        markDown(because: "no connection for \(stallAfter)")
        for cancel in cancels { cancel() }
    }

    /// A call failed for want of the database: calls fail at once until a probe succeeds.
    public func markDown(because reason: String) {
        let startProbe = state.withLock { state -> Bool in
            state.down = true
            downFlag.store(true, ordering: .releasing)
            if state.probing { return false }
            state.probing = true
            return true
        }
        guard startProbe else { return }
        logger.warning("the \(name) database is unavailable (\(reason)); calls fail at once until it answers again")
        // `SELECT 1` every `probeInterval` until one answers; ends when the owner is gone.
        Task { [weak self] in
            while true {
                guard let pause = self?.probeInterval else { return }
                try? await Task.sleep(for: pause)
                guard let self else { return }
                if await self.probeOnce() {
                    self.markUp()
                    return
                }
            }
        }
    }

    /// Whether `SELECT 1` answered within 2 s. A probe stuck on a silent connection is left
    /// behind, not waited for.
    private func probeOnce() async -> Bool {
        do {
            let answer = Mutex<Bool?>(nil)
            let client = self.client
            let attempt = Task {
                let ok = (try? await client.withConnection { connection in
                    try await connection.query("SELECT 1", logger: Self.silent).collect()
                }) != nil
                answer.withLock { $0 = ok }
            }
            defer { attempt.cancel() }
            for _ in 0..<40 {
                try? await Task.sleep(for: .milliseconds(50))
                if let ok = answer.withLock({ $0 }) { return ok }
            }
            return false
        }
    }

    private func markUp() {
        state.withLock { state in
            state.probing = false
            state.down = false
            state.lastSuccess = .now
            downFlag.store(false, ordering: .releasing)
        }
        logger.notice("the \(name) database answers again")
    }

    private static let silent = Logger(label: "gatehouse.postgres.probe", factory: { _ in SwiftLogNoOpLogHandler() })
}
