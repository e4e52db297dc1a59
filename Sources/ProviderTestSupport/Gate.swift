import Synchronization

/// A gate requests wait at until it opens (the fake's hanging modes hold their requests here
/// until the fake stops). Once open it stays open.
public final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// A closed gate.
    public init() {}

    /// Waits until the gate is open (returns at once if it already is).
    public func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Opens the gate: every waiter goes on, and later ones do not wait.
    public func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
