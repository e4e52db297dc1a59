import Foundation
import IdentityCore

/// Values the mail-code decision tables share: one fixed `now`, a user, codes relative to `now`.
/// The mail type is `String`: a decision's mail is whatever its caller's builder returns.
enum Fixture {
    /// The injected clock's reading for every table.
    static let nowMs: Int64 = 1_700_000_000_000
    static let now = Date(timeIntervalSince1970: Double(nowMs) / 1000)
    static let userID = UserID("user-1")
    static let otherID = UserID("user-2")
    static let hash = Data(repeating: 0xAB, count: 32)
    static let revertHash = Data(repeating: 0xCD, count: 32)
    static let expiresAt = Date(timeIntervalSince1970: Double(nowMs + 3_600_000) / 1000)

    /// A creation time `ms` milliseconds before now.
    static func ago(_ ms: Int64) -> Int64 { nowMs - ms }

    /// The user `user-1` at `Old@Example.com`, enabled, unverified, version 7, with changes.
    static func user(
        email: String? = "Old@Example.com", normalized: String? = "old@example.com", verified: Bool = false, disabled: Bool = false
    ) -> MailCodeUser {
        MailCodeUser(id: userID, email: email, emailNormalized: normalized, emailVerified: verified, disabled: disabled, version: 7)
    }

    /// A reset row of `user-1` (id 41), live unless changed.
    static func resetCode(user: UserID = userID, expiresAt: Int64 = nowMs + 1, usedAt: Int64? = nil) -> StoredResetCode {
        StoredResetCode(id: 41, userID: user, expiresAt: expiresAt, usedAt: usedAt)
    }

    /// An email action row of `user-1` (id 52), live unless changed: a verification of
    /// `old@example.com` by default.
    static func action(
        _ purpose: EmailActionPurpose = .verifyEmail, email: String = "Old@Example.com", normalized: String = "old@example.com",
        from: String? = nil, previousVerified: Bool = false, expiresAt: Int64 = nowMs + 1, usedAt: Int64? = nil
    ) -> StoredEmailAction {
        StoredEmailAction(
            id: 52, purpose: purpose, userID: userID, email: email, emailNormalized: normalized, fromEmailNormalized: from,
            previousVerified: previousVerified, expiresAt: expiresAt, usedAt: usedAt)
    }

    /// Nothing yet written for `user-1`.
    static func writes() -> MailCodeWrites<String> { MailCodeWrites(userID: userID) }
}
