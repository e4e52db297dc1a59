import Foundation
import Synchronization

/// Session ids revoked recently. An access token lives at most `ttl`, so an entry older than that
/// can no longer match a valid token and is dropped. At most `capacity` entries are kept; past it
/// the oldest go first, and until the last token an evicted entry could match has expired the
/// list says it is **overflowed**: the gateway then asks the token service about every token the
/// list does not refuse (slower, never wrong).
final class RevocationList: Sendable {
    private struct State {
        var expiry: [String: Date] = [:]
        var order: [(sid: String, expiry: Date)] = []  // insertion order = expiry order
        var head = 0
    }
    private let state = Mutex(State())
    /// Until when (ms since 1970) an evicted entry could still match a valid token; 0: never.
    private let overflowedUntilMs = Atomic<Int64>(0)
    let ttl: TimeInterval
    let capacity: Int

    init(ttl: Duration, capacity: Int) {
        self.ttl = Double(ttl.components.seconds) + Double(ttl.components.attoseconds) / 1e18
        self.capacity = max(1, capacity)
    }

    func insert(_ sid: String, now: Date) {
        state.withLock { s in
            Self.prune(&s, now: now)
            // Listed already (an event and a snapshot, or a reload): its first expiry, which is
            // the later of the two bounds, stands; no second entry in `order`.
            if let listed = s.expiry[sid], listed > now { return }
            let expiry = now.addingTimeInterval(ttl)
            s.expiry[sid] = expiry
            s.order.append((sid, expiry))
            while s.expiry.count > capacity, s.head < s.order.count {
                let old = s.order[s.head]
                s.head += 1
                if s.expiry[old.sid] == old.expiry {
                    s.expiry[old.sid] = nil
                    let until = Int64(old.expiry.timeIntervalSince1970 * 1000)
                    if until > overflowedUntilMs.load(ordering: .relaxed) { overflowedUntilMs.store(until, ordering: .releasing) }
                }
            }
            Self.compact(&s)
        }
    }

    func contains(_ sid: String, now: Date) -> Bool {
        state.withLock { s in
            guard let expiry = s.expiry[sid] else { return false }
            return expiry > now
        }
    }

    var count: Int { state.withLock { $0.expiry.count } }

    /// Whether an entry was evicted for room whose tokens may still be valid at `now`. One atomic load.
    func isOverflowed(now: Date) -> Bool {
        let until = overflowedUntilMs.load(ordering: .acquiring)
        return until != 0 && until > Int64(now.timeIntervalSince1970 * 1000)
    }

    private static func prune(_ s: inout State, now: Date) {
        while s.head < s.order.count, s.order[s.head].expiry <= now {
            let old = s.order[s.head]
            s.head += 1
            if s.expiry[old.sid] == old.expiry { s.expiry[old.sid] = nil }
        }
    }

    private static func compact(_ s: inout State) {
        if s.head > 1024, s.head * 2 > s.order.count {
            s.order.removeFirst(s.head)
            s.head = 0
        }
    }
}
