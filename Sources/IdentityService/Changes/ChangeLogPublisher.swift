import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import Logging
import ProtoCodec
import Synchronization

/// Publishes the change log (PROTOCOL.md "The change log"): every committed change as
/// `user.changed`, in `seq` order, and `identity.heartbeat` with the newest published `seq`.
///
/// One serial tailer (`run`) reads the changes after the last one it published and publishes
/// them in order. It wakes after each commit that added a change (a transaction observer on the
/// store, so every write path, triggers included, wakes it) and at every heartbeat, so a change is
/// never left waiting for the next write. It starts at the log's head: history is not published
/// again.
public final class ChangeLogPublisher: Sendable {
    enum Signal: Sendable { case commit, beat }

    private let store: any IdentityStorage
    private let events: any EventSink
    private let logger: Logger
    private let signals: AsyncStream<Signal>
    private let wake: Wake
    private let observer: AnyObjectBox
    private let published: Mutex<UInt64>
    /// The most changes read per query.
    static let batch = 500

    /// A publisher of `store`'s change log to `events`, starting after the log's current head.
    public static func start(store: any IdentityStorage, events: any EventSink, logger: Logger) async throws -> ChangeLogPublisher {
        let publisher = ChangeLogPublisher(store: store, events: events, logger: logger)
        let head = try await store.changeLogHead()
        publisher.published.withLock { $0 = head }
        return publisher
    }

    private init(store: any IdentityStorage, events: any EventSink, logger: Logger) {
        self.store = store
        self.events = events
        self.logger = logger
        let (signals, continuation) = AsyncStream.makeStream(of: Signal.self)
        self.signals = signals
        let wake = Wake(continuation)
        self.wake = wake
        published = Mutex(0)
        observer = AnyObjectBox(store.observeChangeCommits { wake.commit() })
    }

    /// The `seq` of the newest published change (0: none since the log began).
    public var position: UInt64 { published.withLock { $0 } }

    /// Publishes until the task is cancelled: the changes after each commit, and every `heartbeat`
    /// the changes not yet published (if any) then an `identity.heartbeat`, the first at once.
    /// Run it once per publisher.
    public func run(heartbeat: Duration) async {
        let beats = Task { [wake] in
            while !Task.isCancelled {
                wake.beat()
                try? await Task.sleep(for: heartbeat)
            }
        }
        defer { beats.cancel() }
        for await signal in signals {
            if Task.isCancelled { return }
            wake.taken()
            await publishPending()
            if signal == .beat { await publishHeartbeat() }
        }
    }

    /// Publishes the changes after `position`, in order.
    private func publishPending() async {
        while true {
            let after = position
            let changes: [UserChange]
            do { changes = try await store.changes(after: after, limit: Self.batch) } catch {
                logger.warning("change log: reading the changes after \(after) failed; trying again at the next heartbeat: \(error)")
                return
            }
            for change in changes {
                do { await events.publish(topic: IdentityAPI.Topic.userChanged, payload: try ProtobufEncoder().encode(change)) } catch {
                    logger.error("change log: change \(change.seq) could not be encoded; skipped")
                }
                published.withLock { $0 = change.seq }
            }
            if changes.count < Self.batch { return }
        }
    }

    private func publishHeartbeat() async {
        guard let payload = try? ProtobufEncoder().encode(ChangeFeedHeartbeat(seq: position)) else { return }
        await events.publish(topic: IdentityAPI.Topic.changeFeedHeartbeat, payload: payload)
    }

    /// Wakes the tailer; commits that come while one wake-up is pending add nothing.
    private final class Wake: Sendable {
        private let continuation: AsyncStream<Signal>.Continuation
        private let pending = Mutex(false)

        init(_ continuation: AsyncStream<Signal>.Continuation) { self.continuation = continuation }

        func commit() {
            let first = pending.withLock { pending in
                defer { pending = true }
                return !pending
            }
            if first { continuation.yield(.commit) }
        }

        func beat() { continuation.yield(.beat) }

        /// The tailer took a wake-up and is about to read: a commit from now on wakes it again.
        func taken() { pending.withLock { $0 = false } }

        deinit { continuation.finish() }
    }
}

/// Keeps an object (the store's observation token) alive.
private final class AnyObjectBox: @unchecked Sendable {
    let object: AnyObject
    init(_ object: AnyObject) { self.object = object }
}

/// Prunes the change log (`GATEHOUSE_CHANGE_LOG_RETENTION`, `GATEHOUSE_CHANGE_LOG_MAX_PER_USER`):
/// a role runs `prune()` at start and every minute.
public struct ChangeLogPrune: Sendable {
    /// The store whose log is pruned.
    public let store: any IdentityStorage
    /// The time (injected in tests).
    public let clock: WallClock
    /// Changes older than this many seconds go.
    public let retention: TimeInterval
    /// Of each user, only the newest this many changes stay.
    public let maxPerUser: Int
    /// Audit events older than this many seconds go too (the same job prunes the audit log).
    public let auditRetention: TimeInterval

    /// A prune of `store`'s change log and audit log by these limits, reading the time from `clock`.
    public init(store: any IdentityStorage, clock: WallClock, retention: TimeInterval, maxPerUser: Int, auditRetention: TimeInterval = 7_776_000) {
        self.store = store
        self.clock = clock
        self.retention = retention
        self.maxPerUser = maxPerUser
        self.auditRetention = auditRetention
    }

    /// Deletes what is past the limits now; how many changes went (audit events not counted).
    @discardableResult
    public func prune() async throws -> Int {
        let now = clock.now
        try await store.pruneAudit(before: now.addingTimeInterval(-auditRetention))
        if let shared = store.sharedResumeHandles { try await shared.purgeExpiredHandles(now: now) }
        return try await store.pruneChanges(before: now.addingTimeInterval(-retention), maxPerUser: maxPerUser)
    }
}
