import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import ProtoCodec
import RPCRouting
import Synchronization

/// Removes anonymous users with no activity for `retention`, sessions included (issue 18 §1).
///
/// A user's activity is the latest of its creation, its last sign-in and the last use of any of
/// its sessions (issue or refresh). The last is the token service's to know: a pass lists the
/// store's candidates in batches (anonymous users whose activity known to the store is older than
/// the cutoff, through a partial index), asks `token.lastActivity` about each batch, records the
/// activity of those found active (so they leave the candidates until the retention has passed
/// again; nothing is written on the refresh path), and deletes the rest through the delete path
/// of `identity.deleteUser`: the row (only if still anonymous and still inactive, in one
/// transaction, so a user upgraded or signed in meanwhile is left alone), then every session
/// revoked in the token service (`token.revokeAllSessions`, reason `anonymous_expired`, committed
/// there before the next step), then `user.deleted` published.
///
/// Each batch is at most `batchSize` users and each deletion its own small write, so sign-ins
/// and refreshes beside a pass wait for one small write at a time. A failure ends the pass (the
/// caller logs it and tries again at the next interval). A user deleted whose revocation failed
/// is kept in memory and revoked first at the next pass; should the process stop before, its
/// sessions still cannot refresh (the token service finds the user gone and revokes them) and its
/// access tokens expire within their lifetime.
public final class AnonymousSweep: Sendable {
    /// What one pass did.
    public struct Counts: Sendable, Equatable {
        /// Anonymous users deleted, with their sessions.
        public var deleted = 0
        /// Candidates kept because a session of theirs was used within the retention.
        public var active = 0
        /// Counts of a pass.
        public init(deleted: Int = 0, active: Int = 0) {
            self.deleted = deleted
            self.active = active
        }
    }

    /// The reason stored with the revoked sessions of a swept user.
    public static let revokeReason = "anonymous_expired"

    /// Where the users are.
    public let store: any IdentityStorage
    /// Reaches the token service (`token.lastActivity`, `token.revokeAllSessions`).
    public let tokens: any RPCCaller
    /// Where `user.deleted` goes.
    public let events: any EventSink
    /// The time a pass measures the retention from.
    public let clock: WallClock
    /// How long an anonymous user may be inactive; 0: never removed (the sweep is off).
    public let retention: TimeInterval
    /// Most candidates per batch (at most `TokenAPI.maxLastActivityUsers`).
    public let batchSize: Int
    /// Most batches per pass; the rest waits for the next pass.
    public let maxBatches: Int
    let logger: Logger
    /// Users deleted whose sessions are not known to be revoked yet.
    private let unrevoked = Mutex<Set<UserID>>([])

    /// A sweep of `store`'s anonymous users inactive for `retention` (0: off), in batches of
    /// `batchSize` users, at most `maxBatches` per pass.
    public init(
        store: any IdentityStorage, tokens: any RPCCaller, events: any EventSink = DiscardingEventSink(), clock: WallClock = .system,
        retention: TimeInterval, batchSize: Int = 500, maxBatches: Int = 1000, logger: Logger = Logger(label: "gatehouse.identity")
    ) {
        self.store = store
        self.tokens = tokens
        self.events = events
        self.clock = clock
        self.retention = retention
        self.batchSize = min(max(1, batchSize), TokenAPI.maxLastActivityUsers)
        self.maxBatches = max(1, maxBatches)
        self.logger = logger
    }

    /// Whether passes remove anything (`retention` is not 0).
    public var isEnabled: Bool { retention > 0 }

    /// One pass: revokes what a failed pass left, then removes every anonymous user inactive
    /// since before `now - retention` (up to `maxBatches` batches). Throws on the first failure.
    @discardableResult
    public func sweep() async throws -> Counts {
        guard isEnabled else { return Counts() }
        for id in unrevoked.withLock({ Array($0) }) {
            try await revokeSessions(of: id)
            await publishDeleted(id)
        }
        let cutoff = clock.now.addingTimeInterval(-retention)
        var counts = Counts()
        for _ in 0..<maxBatches {
            try Task.checkCancellation()
            let candidates = try await store.anonymousCandidates(inactiveBefore: cutoff, limit: batchSize)
            if candidates.isEmpty { break }
            let reply = try await tokens.call(TokenAPI.lastActivity, LastActivityRequest(userIDs: candidates.map(\.id.rawValue)))
            let used = Dictionary(reply.entries.map { (UserID($0.userID), $0.lastUsedAt) }, uniquingKeysWith: max)
            var active: [UserID: Date] = [:]
            var idle: [UserID] = []
            for candidate in candidates {
                if let at = used[candidate.id], at >= cutoff { active[candidate.id] = at } else { idle.append(candidate.id) }
            }
            // Recorded first: should a deletion below fail, the active ones still leave the candidates.
            try await store.recordSessionActivity(active)
            counts.active += active.count
            for id in idle {
                try Task.checkCancellation()
                let event = AuditEvent(occurredAt: clock.now, kind: AuditEvent.Kind.anonymousSwept, userID: id.rawValue, actor: AuditEvent.Actor.system)
                let deleted = try await AuditScope.$current.withValue(AuditRecorder(event)) {
                    try await store.deleteAnonymous(id: id, inactiveBefore: cutoff)
                }
                guard deleted else { continue }
                unrevoked.withLock { _ = $0.insert(id) }
                counts.deleted += 1
                try await revokeSessions(of: id)
                await publishDeleted(id)
            }
            if candidates.count < batchSize { break }
        }
        if counts != Counts() {
            logger.info("anonymous sweep deleted \(counts.deleted) inactive anonymous users; \(counts.active) candidates were active")
        }
        return counts
    }

    /// Revokes every session of `id` (committed in the token service before it returns).
    private func revokeSessions(of id: UserID) async throws {
        _ = try await tokens.call(TokenAPI.revokeAllSessions, UserSessionsRequest(userID: id.rawValue, reason: Self.revokeReason))
        unrevoked.withLock { _ = $0.remove(id) }
    }

    private func publishDeleted(_ id: UserID) async {
        do {
            let event = UserEvent(userID: id.rawValue, version: 0, occurredAt: clock.now)
            await events.publish(topic: IdentityAPI.Topic.userDeleted, payload: try ProtobufEncoder().encode(event))
        } catch {
            logger.warning("event \(IdentityAPI.Topic.userDeleted) does not encode: \(error)")
        }
    }
}
