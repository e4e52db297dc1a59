import Foundation
import GatehouseContracts
import IdentityCore
import IdentityService
import Logging
import Mail
import PostgresNIO
import PostgresSupport

// STUBS, to be replaced by the port (issue 24): every method here answers `notPorted`.
extension PostgresUserStore {
    /// The migrations of this part.
    static let logMigrations: [PostgresMigrator.Migration] = []

    static func appendAudit(_ event: AuditEvent, on connection: PostgresConnection, logger: Logger) async throws {}
    /// Not on PostgreSQL yet.
    public func anonymousCandidates(inactiveBefore cutoff: Date, limit: Int) async throws -> [AnonymousCandidate] { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func recordSessionActivity(_ activity: [UserID: Date]) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func deleteAnonymous(id: UserID, inactiveBefore cutoff: Date) async throws -> Bool { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func recordPendingAudit() async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func auditEvents(_ request: ListAuditRequest) async throws -> ListAuditResponse { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    @discardableResult public func pruneAudit(before cutoff: Date, batch: Int) async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func listChanges(afterSeq: UInt64, limit: Int) async throws -> ListChangesResponse { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func userChanges(id: UserID, resume: Bool, afterSeq: UInt64, limit: Int) async throws -> UserChangesResponse { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func changes(after afterSeq: UInt64, limit: Int) async throws -> [UserChange] { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func changeLogHead() async throws -> UInt64 { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func observeChangeCommits(_ onCommit: @escaping @Sendable () -> Void) -> AnyObject { fatalError("not ported yet") }
    /// Not on PostgreSQL yet.
    @discardableResult public func pruneChanges(before cutoff: Date, maxPerUser: Int, batch: Int) async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func deleteMigratedAnonymous(id: UserID) async throws { throw Self.notPorted }
}
