import Foundation
import GatehouseContracts

/// A token store shared by several token instances (PostgreSQL) numbers revocations itself: each
/// revoking transaction draws the next numbers of one database-wide sequence, in commit order, and
/// keeps the events, so any instance can publish every revocation, whichever instance made it.
public protocol SharedRevocationLog: TokenStorage {
    /// The feed's epoch: drawn once for the database, the same for every instance.
    func revocationEpoch() async throws -> String
    /// The revocations numbered after `seq`, in order, at most `limit` (epoch left empty).
    func revocationEvents(after seq: UInt64, limit: Int) async throws -> [SessionRevokedEvent]
    /// The last number drawn, and the sessions revoked after `since`, read in one snapshot: every
    /// revocation numbered up to that seq is in the list.
    func revocationSnapshot(since: Date) async throws -> (seq: UInt64, sessions: [RevokedSession])
}
