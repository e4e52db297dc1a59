import Foundation
import TokenPorts
import GatehouseContracts
import GatehouseSupport
import Logging
import ProtoCodec
import Synchronization

/// Numbers the token service's `session.revoked` events and beats its `token.heartbeat`.
///
/// **One instance** (`init(random:publish:)`): each start of the service draws a new random
/// `epoch`; within it every published revocation gets the next `seq` (1, 2, 3, …), assigned and
/// handed to the publisher under one lock, so the events leave in order without gaps. A heartbeat
/// carries the last `seq`, so a subscriber that lost an event, or whose publisher restarted
/// (another epoch), finds out within one beat even when no further revocation comes, and reloads
/// `token.listRevocations`.
///
/// **Several instances** (`init(shared:epoch:publish:logger:)`): the database numbers the
/// revocations (`SharedRevocationLog`) and every instance publishes all of them, in order, with the
/// database's epoch: after each of its own revocations and at each heartbeat it reads the events
/// past the last one it published. A gateway subscribes to every instance; the copies of one event
/// carry the same epoch and seq, so a duplicate changes nothing, and while one instance is down the
/// others still publish everything (within one heartbeat for what the lost one had not sent).
public final class RevocationFeed: Sendable {
    /// Random, new at each start of the token service; the database's with a shared store.
    public let epoch: String
    private let seq = Mutex<UInt64>(0)
    private let publish: @Sendable (String, [UInt8]) -> Void
    private let follower: Follower?

    /// A feed of a new epoch drawn from `random`, publishing through `publish` (topic, payload).
    public init(random: @Sendable (Int) -> [UInt8], publish: @escaping @Sendable (String, [UInt8]) -> Void) {
        epoch = Base64URL.encode(random(12))
        self.publish = publish
        follower = nil
    }

    /// A feed publishing the revocations of `log` (all instances'), from the last one numbered now.
    public init(
        shared log: any SharedRevocationLog, epoch: String, position: UInt64, publish: @escaping @Sendable (String, [UInt8]) -> Void,
        logger: Logger
    ) {
        self.epoch = epoch
        self.publish = publish
        seq.withLock { $0 = position }
        follower = Follower(log: log, logger: logger)
    }

    /// Whether the database numbers the revocations (several instances).
    public var isShared: Bool { follower != nil }

    /// The number of the last published revocation of this epoch (0: none yet).
    public var position: UInt64 { seq.withLock { $0 } }

    /// Publishes `event` (its epoch and seq filled in) as the next revocation. The service calls
    /// it for each revocation it has committed. With a shared store, publishes what the database
    /// numbered since the last event published (this one included).
    public func announce(_ event: SessionRevokedEvent) {
        if let follower {
            // One read of the log covers every revocation committed before it: a batch (every
            // session of a user) starts one pass, not one per session.
            if follower.request() { Task { await follower.drain(self) } }
            return
        }
        seq.withLock { seq in
            var event = event
            event.epoch = epoch
            event.seq = seq + 1
            guard let payload = try? ProtobufEncoder().encode(event) else { return }
            seq += 1
            publish(TokenAPI.Topic.sessionRevoked, payload)
        }
    }

    /// Publishes a `token.heartbeat` with the current position (with a shared store, after
    /// publishing what the database numbered since the last event published).
    public func heartbeat() {
        if let follower {
            Task { await follower.follow(self, beat: true) }
            return
        }
        beat()
    }

    /// With a shared store: publishes what the database numbered since the last event published,
    /// then a heartbeat; returns once done (for tests and the heartbeat service).
    public func catchUp() async {
        if let follower { await follower.follow(self, beat: true) } else { beat() }
    }

    private func beat() {
        seq.withLock { seq in
            guard let payload = try? ProtobufEncoder().encode(RevocationHeartbeat(epoch: epoch, seq: seq)) else { return }
            publish(TokenAPI.Topic.heartbeat, payload)
        }
    }

    /// Publishes `events` (numbered by the database, in order) past the current position.
    fileprivate func publishShared(_ events: [SessionRevokedEvent]) {
        seq.withLock { seq in
            for var event in events where event.seq > seq {
                event.epoch = epoch
                guard let payload = try? ProtobufEncoder().encode(event) else { continue }
                seq = event.seq
                publish(TokenAPI.Topic.sessionRevoked, payload)
            }
        }
    }

    /// Reads the shared log, one pass at a time, so events leave in order.
    private actor Follower {
        let log: any SharedRevocationLog
        let logger: Logger
        /// Whether a pass was asked for since the running one started, and whether one runs.
        private nonisolated let pending = Mutex<(asked: Bool, running: Bool)>((false, false))
        init(log: any SharedRevocationLog, logger: Logger) {
            self.log = log
            self.logger = logger
        }

        /// Asks for a pass after the revocations committed so far; true when the caller must
        /// start `drain` (none runs), false when the running one will make that pass.
        nonisolated func request() -> Bool {
            pending.withLock { state in
                state.asked = true
                if state.running { return false }
                state.running = true
                return true
            }
        }

        /// Makes passes while they are asked for.
        func drain(_ feed: RevocationFeed) async {
            while pending.withLock({ state -> Bool in
                if state.asked {
                    state.asked = false
                    return true
                }
                state.running = false
                return false
            }) {
                await follow(feed, beat: false)
            }
        }

        func follow(_ feed: RevocationFeed, beat: Bool) async {
            do {
                while true {
                    let events = try await log.revocationEvents(after: feed.position, limit: 1000)
                    feed.publishShared(events)
                    if events.count < 1000 { break }
                }
            } catch {
                // The next heartbeat tries again; until then subscribers see no new position.
                logger.warning("cannot read the shared revocation log: \(error)")
                return
            }
            if beat { feed.beat() }
        }
    }
}
