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
    static let mailMigrations: [PostgresMigrator.Migration] = []

    /// Not on PostgreSQL yet.
    public func enqueueMail(_ message: MailMessage, at now: Date) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func dueOutbox(at now: Date, limit: Int) async throws -> [OutboxEntry] { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func outboxEntries() async throws -> [OutboxEntry] { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func nextOutboxAttempt() async throws -> Date? { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func outboxCount(state: String) async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func markOutboxSent(id: Int64, attempts: Int, at now: Date) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func markOutboxFailed(id: Int64, attempts: Int, error: String, nextAttemptAt: Date?) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func purgeOutbox(before cutoff: Date) async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func purgeCodes(before cutoff: Date) async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func storePasswordReset(userID: UserID, email: String, codeHash: Data, expiresAt: Date, mail: MailMessage, now: Date, perMinute: Int, perHour: Int) async throws -> PasswordResetOutcome { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func passwordResetUser(codeHash: Data, now: Date) async throws -> (UserID, String?)? { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func usePasswordReset(codeHash: Data, userID: UserID, passwordHash: String, now: Date) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func purgePasswordResets(before cutoff: Date) async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func voidPasswordResets(userID: UserID, at now: Date) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func passwordResetCount(userID: UserID) async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func insert(_ user: UserRecord, verification: PendingVerification) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func update(id: UserID, now: Date, verification: PendingVerification, _ change: @escaping @Sendable (inout UserRecord) throws -> Void) async throws -> UserRecord { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func storeEmailVerification(userID: UserID, verification: PendingVerification, now: Date, perMinute: Int, perHour: Int) async throws -> EmailVerificationOutcome { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func useEmailVerification(codeHash: Data, now: Date) async throws -> (user: UserRecord, changed: Bool) { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func activeEmailVerificationCount(userID: UserID, now: Date) async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func emailChangeCode(codeHash: Data, purpose: EmailActionPurpose, now: Date) async throws -> EmailChangeCode? { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func storeEmailChange(userID: UserID, from fromNormalized: String, to email: EmailAddress, codeHash: Data, expiresAt: Date, now: Date, perMinute: Int, perHour: Int, mail: @escaping @Sendable (_ currentEmail: String) -> MailMessage) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func confirmEmailChange(codeHash: Data, revertCodeHash: Data, revertExpiresAt: Date, now: Date, notice: @escaping @Sendable (_ oldEmail: String, _ newEmail: String) -> MailMessage) async throws -> UserID { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func revertEmailChange(codeHash: Data, now: Date, reset: RevertPasswordReset?) async throws -> UserID { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func emailChangeCodeCount(userID: UserID, purpose: EmailActionPurpose, now: Date) async throws -> Int { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func storeLinkCode(_ kind: LinkCodeKind, userID: UserID, email: String, emailNormalized: String, codeHash: Data, expiresAt: Date, now: Date) async throws { throw Self.notPorted }
    /// Not on PostgreSQL yet.
    public func update(id: UserID, now: Date, voidingCodes: Bool, _ change: @escaping @Sendable (inout UserRecord) throws -> Void) async throws -> UserRecord { throw Self.notPorted }
}
