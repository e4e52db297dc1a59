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
    static let adminMigrations: [PostgresMigrator.Migration] = []

    /// Not on PostgreSQL yet.
    public func createAdminKey(name typed: String, scopes asked: [String], now: Date) async throws -> CreateAdminKeyResponse { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func insertAdminKey(_ key: AdminKey, secretHash: Data) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func adminKeys() async throws -> [AdminKey] { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func revokeAdminKey(id: String, at now: Date) async throws -> AdminKey { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func activeAdminKey(id: String) async throws -> (AdminKey, Data)? { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func touchAdminKey(id: String, at now: Date) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func users(filter: UserFilter, after afterID: String, limit: Int) async throws -> ([UserRecord], Bool) { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func importUsers(_ candidates: [ImportCandidate], update: Bool, now: Date, auditDetail: (@Sendable ([ImportWrite]) -> String)?) async throws -> [ImportWrite] { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func users(after afterID: String, limit: Int) async throws -> [UserRecord] { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func insert(_ user: UserRecord, identity provider: String, subject: String) async throws -> UserRecord { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func link(provider: String, subject: String, to id: UserID, now: Date, _ change: @escaping @Sendable (inout UserRecord) throws -> Void) async throws -> UserRecord { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func unlink(provider: String, from id: UserID, now: Date) async throws -> UserRecord { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func subjects(provider: String, of id: UserID) async throws -> [String] { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func storeAppleToken(user: UserID, subject: String, clientID: String, sealed: Data, at: Date) async throws -> Bool { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func appleTokenCount() async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func dueAppleRevocations(now: Date, limit: Int) async throws -> [PendingAppleRevocation] { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func claimAppleRevocation(id: Int64, now: Date, until: Date) async throws -> Bool { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func finishAppleRevocation(id: Int64) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func retryAppleRevocation(id: Int64, at next: Date) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func pendingAppleRevocationCount() async throws -> Int { throw Self.notPorted }
}
