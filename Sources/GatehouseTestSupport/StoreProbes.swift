import Foundation
import IdentityCore
import IdentityPorts
import Mail
import PostgresNIO
@testable import PostgresStores
@testable import SQLiteStores
import GatehouseSupport
import GRDB

/// What tests count in a store beyond the ports (how many codes are live, tokens kept,
/// revocations queued): queries no production code asks, so they stay out of `IdentityStorage`.
public protocol IdentityStoreProbes: Sendable {
    /// The number of password reset rows of the user.
    func passwordResetCount(userID: UserID) async throws -> Int
    /// The user's unused, unexpired verification codes.
    func activeEmailVerificationCount(userID: UserID, now: Date) async throws -> Int
    /// The user's unused codes of `purpose`.
    func emailChangeCodeCount(userID: UserID, purpose: EmailActionPurpose, now: Date) async throws -> Int
    /// The number of stored Apple refresh tokens.
    func appleTokenCount() async throws -> Int
    /// The Apple revocations waiting.
    func pendingAppleRevocationCount() async throws -> Int
}

extension IdentityStorage {
    /// The store's probes (every store of the tests has them).
    public var probes: any IdentityStoreProbes {
        guard let probes = self as? any IdentityStoreProbes else { fatalError("\(type(of: self)) has no test probes") }
        return probes
    }
}

extension ForwardingIdentityStorage: IdentityStoreProbes {
    /// Forwards to `inner`.
    public func passwordResetCount(userID: UserID) async throws -> Int { try await inner.probes.passwordResetCount(userID: userID) }
    /// Forwards to `inner`.
    public func activeEmailVerificationCount(userID: UserID, now: Date) async throws -> Int {
        try await inner.probes.activeEmailVerificationCount(userID: userID, now: now)
    }
    /// Forwards to `inner`.
    public func emailChangeCodeCount(userID: UserID, purpose: EmailActionPurpose, now: Date) async throws -> Int {
        try await inner.probes.emailChangeCodeCount(userID: userID, purpose: purpose, now: now)
    }
    /// Forwards to `inner`.
    public func appleTokenCount() async throws -> Int { try await inner.probes.appleTokenCount() }
    /// Forwards to `inner`.
    public func pendingAppleRevocationCount() async throws -> Int { try await inner.probes.pendingAppleRevocationCount() }
}

extension SQLiteUserStore: IdentityStoreProbes {
    /// The mails of `kind` (a template kind: `password_reset`, `verify_email`, …) in the outbox,
    /// oldest first (for tests).
    public func outboxMails(kind: String) async throws -> [MailMessage] {
        let rows = try await read { db in
            try String.fetchAll(db, sql: "SELECT message FROM outbox WHERE kind = ? ORDER BY id", arguments: [kind])
        }
        return try rows.map { try JSONDecoder().decode(MailMessage.self, from: Data($0.utf8)) }
    }

    /// The number of password reset rows of `userID` (for tests).
    public func passwordResetCount(userID: UserID) async throws -> Int {
        try await read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM password_resets WHERE user_id = ?", arguments: [userID.rawValue]) ?? 0
        }
    }
    /// The user's unused, unexpired verification codes (for tests).
    public func activeEmailVerificationCount(userID: UserID, now: Date) async throws -> Int {
        try await read { db in
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM email_actions WHERE user_id = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?",
                arguments: [userID.rawValue, EmailActionPurpose.verifyEmail.rawValue, now.millisecondsSince1970]) ?? 0
        }
    }
    /// The unused codes of `userID` by purpose (for tests).
    public func emailChangeCodeCount(userID: UserID, purpose: EmailActionPurpose, now: Date) async throws -> Int {
        try await read { db in
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM email_actions WHERE user_id = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?",
                arguments: [userID.rawValue, purpose.rawValue, now.millisecondsSince1970]) ?? 0
        }
    }
    /// How many Apple tokens are kept (for tests and figures).
    public func appleTokenCount() async throws -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM apple_tokens") ?? 0 }
    }
    /// Revocations waiting (for tests, figures and `/readyz`-style checks).
    public func pendingAppleRevocationCount() async throws -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM apple_revocations") ?? 0 }
    }
}

extension PostgresUserStore: IdentityStoreProbes {
    /// The number of password reset rows of `userID` (tests).
    public func passwordResetCount(userID: UserID) async throws -> Int {
        try await run { connection in
            try await Self.mailCount(
                "SELECT count(*) FROM password_resets WHERE user_id = \(userID.rawValue)", on: connection, logger: self.queryLogger)
        }
    }
    /// The user's unused, unexpired verification codes (tests).
    public func activeEmailVerificationCount(userID: UserID, now: Date) async throws -> Int {
        try await emailChangeCodeCount(userID: userID, purpose: .verifyEmail, now: now)
    }
    /// The unused, unexpired codes of `userID` by purpose (tests).
    public func emailChangeCodeCount(userID: UserID, purpose: EmailActionPurpose, now: Date) async throws -> Int {
        try await run { connection in
            try await Self.mailCount(
                """
                SELECT count(*) FROM email_actions
                WHERE user_id = \(userID.rawValue) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > \(now.millisecondsSince1970)
                """, on: connection, logger: self.queryLogger)
        }
    }
    /// How many Apple tokens are kept (for tests and figures).
    public func appleTokenCount() async throws -> Int {
        try await countRows("SELECT count(*) FROM apple_tokens")
    }
    /// Revocations waiting (for tests, figures and `/readyz`-style checks).
    public func pendingAppleRevocationCount() async throws -> Int {
        try await countRows("SELECT count(*) FROM apple_revocations")
    }
}
