import Synchronization

/// A gate handlers wait at until the test opens it (then every waiter, and any later one, goes
/// on), for tests that need requests held in flight.
public final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// A closed gate.
    public init() {}

    /// Returns once the gate is open.
    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let goNow = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if goNow { continuation.resume() }
        }
    }

    /// How many callers wait at the gate now.
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Returns once `count` callers wait; throws `WaitTimedOut` after `timeout`.
    public func waitForWaiters(_ count: Int, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("\(count) waiting at the gate", timeout: timeout, interval: .milliseconds(1)) { waiting >= count }
    }

    /// Opens the gate for good: every waiter goes on.
    public func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
