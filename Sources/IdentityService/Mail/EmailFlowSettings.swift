import Foundation
import IdentityPorts

/// Email verification and the confirmed email change (issue 19 §3–§4): when verification mail
/// is sent, how long each code works, and how many such mails one user gets.
public struct EmailFlowSettings: Sendable, Equatable {
    /// When a verification mail is sent (`GATEHOUSE_EMAIL_VERIFICATION`).
    public enum Verification: String, Sendable, CaseIterable {
        /// Never on its own; the app can still ask for one (`POST /v1/me/email-verification`).
        case off
        /// At sign-up and at an anonymous user's upgrade.
        case send
        /// As `send`, and password sign-in is refused (`email_not_verified`) until the address
        /// is verified; sign-up then answers without a session.
        case required
    }

    /// When verification mail is sent (`off` by default).
    public var verification: Verification = .off
    /// Seconds a verification code works (`GATEHOUSE_EMAIL_VERIFICATION_TTL`, 86 400).
    public var verificationTTL: TimeInterval = 86_400
    /// Seconds the code mailed to a new address works (`GATEHOUSE_EMAIL_CHANGE_TTL`, 3600).
    public var changeTTL: TimeInterval = 3600
    /// Seconds the revert code mailed to the old address works (`GATEHOUSE_EMAIL_REVERT_TTL`, 7 days).
    public var revertTTL: TimeInterval = 7 * 86_400
    /// At most this many mails of one kind (verification, change) for one user a minute (1) ...
    public var perMinute = 1
    /// ... and an hour (5).
    public var perHour = 5

    /// The documented defaults.
    public init() {}
}
