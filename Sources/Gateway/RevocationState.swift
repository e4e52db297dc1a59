import Foundation
import GatehouseContracts
import Synchronization

/// What the gateway knows of the token service's revocations, and whether it is complete.
///
/// The `RevocationList` holds the revoked session ids. The state is **current** when a
/// `token.listRevocations` snapshot has been loaded since the last (re)subscription and no event
/// is known to be missing: the feed's last announced position (an event's or a heartbeat's
/// epoch and seq) is one the list covers. A seq gap, another epoch (the token service
/// restarted) or a new subscription makes it not current and asks for a reload; a reload merges
/// the snapshot into the list (entries are never dropped by it).
///
/// Authenticated requests check `isCurrent` (one atomic load) before the list; when it is false
/// they wait for the reload up to their deadline (`waitUntilCurrent`) and are otherwise refused.
final class RevocationState: Sendable {
    /// What the loader should do.
    enum Reload: Sendable {
        /// Load unless the state is current by the time the loader gets to it.
        case ifBehind
        /// Load anyway (the feed has been silent: it may be cut off without the gateway knowing).
        case always
    }

    private struct Position: Equatable {
        var epoch: String
        var seq: UInt64
    }

    private struct Tracking {
        /// The list holds every revocation of `known.epoch` numbered up to `known.seq`.
        var known: Position?
        /// The latest position the publisher announced (event or heartbeat).
        var seen: Position?
        /// Seqs of `aheadEpoch` received past `known.seq` (events that came before the snapshot
        /// that covers the ones in between); bounded, a reload covers what it forgets.
        var ahead: Set<UInt64> = []
        var aheadEpoch: String?
        /// Bumped at each (re)subscription; a load started after the latest bump must complete.
        var subscriptions = 1
        var loadedSubscription = 0
        var lastNotice = ContinuousClock.now
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        var nextWaiter: UInt64 = 0

        var isCurrent: Bool {
            guard let known, loadedSubscription == subscriptions else { return false }
            guard let seen else { return true }
            return seen.epoch == known.epoch && seen.seq <= known.seq
        }
    }

    /// The revoked session ids.
    let list: RevocationList
    private let current = Atomic<Bool>(false)
    private let loadCount = Atomic<Int>(0)
    private let failureCount = Atomic<Int>(0)
    private let tracking = Mutex(Tracking())
    private let requests: AsyncStream<Reload>.Continuation
    /// Reloads asked for (the newest one is kept while the loader is busy).
    let reloadRequests: AsyncStream<Reload>

    init(list: RevocationList) {
        self.list = list
        (reloadRequests, requests) = AsyncStream.makeStream(of: Reload.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Whether a snapshot is loaded and no event is known to be missing. One atomic load.
    var isCurrent: Bool { current.load(ordering: .acquiring) }

    /// True as soon as the state is current; false if it is still not after `timeout`.
    func waitUntilCurrent(timeout: Duration) async -> Bool {
        if isCurrent { return true }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let id: UInt64? = tracking.withLock { t in
                if t.isCurrent { return nil }
                t.nextWaiter += 1
                t.waiters[t.nextWaiter] = continuation
                return t.nextWaiter
            }
            guard let id else { return continuation.resume(returning: true) }
            Task {
                try? await Task.sleep(for: timeout)
                let waiter = self.tracking.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.resume(returning: self.isCurrent)
            }
        }
    }

    /// A new subscription to the feed: events may have been missed before it, so a snapshot
    /// loaded after this point is needed.
    func subscribed() {
        update { t in
            t.subscriptions += 1
            t.lastNotice = .now
        }
    }

    /// Applies one notice of the feed: a revoked session goes into the list at once.
    func apply(_ notice: RevocationNotice, now: Date) {
        switch notice {
        case .revoked(let event):
            list.insert(event.sessionID, now: now)
            update { t in
                Self.see(Position(epoch: event.epoch, seq: event.seq), in: &t)
                if t.aheadEpoch != event.epoch {
                    t.aheadEpoch = event.epoch
                    t.ahead = []
                }
                if t.ahead.count >= 100_000 { t.ahead = [] }
                t.ahead.insert(event.seq)
                Self.advance(&t)
            }
        case .heartbeat(let beat):
            update { t in Self.see(Position(epoch: beat.epoch, seq: beat.seq), in: &t) }
        }
    }

    /// Marks the start of a load; pass the result to `install`.
    func loadStarting() -> Int { tracking.withLock { $0.subscriptions } }

    /// Merges a snapshot whose load started at `mark` into the list; returns whether the state is
    /// now current.
    @discardableResult
    func install(_ snapshot: RevocationSnapshot, mark: Int, now: Date) -> Bool {
        for session in snapshot.sessions { list.insert(session.sessionID, now: now) }
        loadCount.add(1, ordering: .relaxed)
        return update { t in
            if let known = t.known, known.epoch == snapshot.epoch {
                t.known?.seq = max(known.seq, snapshot.seq)
            } else {
                t.known = Position(epoch: snapshot.epoch, seq: snapshot.seq)
            }
            t.loadedSubscription = max(t.loadedSubscription, mark)
            Self.advance(&t)
        }
    }

    /// Counts a load that failed.
    func loadFailed() { failureCount.add(1, ordering: .relaxed) }

    /// Snapshots loaded, and loads that failed, since start.
    var loads: Int { loadCount.load(ordering: .relaxed) }
    var loadFailures: Int { failureCount.load(ordering: .relaxed) }

    /// Sessions this gateway revoked itself (the token service acknowledged them).
    func insert(_ sessionIDs: some Sequence<String>, now: Date) {
        for id in sessionIDs { list.insert(id, now: now) }
    }

    /// How long since the feed last said anything (or since the subscription).
    var silence: Duration { ContinuousClock.now - tracking.withLock { $0.lastNotice } }

    /// Asks the loader for a reload.
    func requestReload(_ kind: Reload) { requests.yield(kind) }

    /// Ends the reload requests (at shutdown).
    func finish() { requests.finish() }

    private static func see(_ position: Position, in t: inout Tracking) {
        t.lastNotice = .now
        if let seen = t.seen, seen.epoch == position.epoch {
            t.seen?.seq = max(seen.seq, position.seq)
        } else {
            t.seen = position
        }
    }

    /// Moves `known` over the seqs received in a row past it.
    private static func advance(_ t: inout Tracking) {
        guard let known = t.known, t.aheadEpoch == known.epoch, !t.ahead.isEmpty else { return }
        var seq = known.seq
        while t.ahead.remove(seq + 1) != nil { seq += 1 }
        t.known?.seq = seq
        t.ahead = t.ahead.filter { $0 > seq }
    }

    /// Runs `change`, then publishes whether the state is current: waiters are woken when it is,
    /// a reload is asked for when it is not.
    @discardableResult
    private func update(_ change: (inout Tracking) -> Void) -> Bool {
        let (isCurrent, woken) = tracking.withLock { t in
            change(&t)
            let isCurrent = t.isCurrent
            current.store(isCurrent, ordering: .releasing)
            var woken: [CheckedContinuation<Bool, Never>] = []
            if isCurrent {
                woken = Array(t.waiters.values)
                t.waiters = [:]
            }
            return (isCurrent, woken)
        }
        for waiter in woken { waiter.resume(returning: true) }
        if !isCurrent { requests.yield(.ifBehind) }
        return isCurrent
    }
}
