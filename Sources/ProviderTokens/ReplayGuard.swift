import Foundation
import Synchronization

/// The ID tokens already accepted, each until its `exp`: a token presented again before then is
/// refused (`replayed`).
///
/// In memory and bounded (`capacity` entries; when full, expired entries go first, then those
/// expiring soonest), read with the `now` the verifier passes (its injected clock).
///
/// - Important: this guard only sees the tokens of its own process. Once Gatehouse runs
///   several identity instances (issue 24), the set of used token ids must be shared between
///   them (in the identity database or a shared store), or a token accepted by one instance can
///   be replayed against another.
public final class ReplayGuard: Sendable {
    private struct State {
        var expiries: [String: Date] = [:]
    }

    /// The most token ids remembered at once.
    public let capacity: Int
    private let state = Mutex(State())

    /// A guard remembering up to `capacity` token ids (at least 1).
    public init(capacity: Int = 100_000) {
        self.capacity = max(1, capacity)
    }

    /// Records `id` as used until `expiry` and answers true, or answers false when it is
    /// already recorded and not yet past its expiry at `now`.
    public func accept(_ id: String, until expiry: Date, now: Date) -> Bool {
        state.withLock { state in
            if let known = state.expiries[id], known > now { return false }
            if state.expiries.count >= capacity { Self.makeRoom(&state.expiries, capacity: capacity, now: now) }
            state.expiries[id] = expiry
            return true
        }
    }

    /// Forgets `id`, so the same token or notification is accepted again: for a caller whose
    /// action on it failed, so that the sender's retry is not refused as a replay.
    public func forget(_ id: String) {
        _ = state.withLock { $0.expiries.removeValue(forKey: id) }
    }

    /// How many token ids are remembered.
    public var count: Int { state.withLock { $0.expiries.count } }

    /// Drops the expired ids; if that frees less than a tenth of the room, drops the ids
    /// expiring soonest as well (the least harm: their tokens are the nearest to being refused anyway).
    private static func makeRoom(_ expiries: inout [String: Date], capacity: Int, now: Date) {
        expiries = expiries.filter { $0.value > now }
        let target = capacity - max(1, capacity / 10)
        guard expiries.count > target else { return }
        let soonest = expiries.sorted { $0.value < $1.value }.prefix(expiries.count - target)
        for (id, _) in soonest { expiries.removeValue(forKey: id) }
    }
}
