import Foundation
import GatehouseSupport

/// The rules of the codes Gatehouse mails (password reset, email verification, email change and
/// its revert) and of the operator's link codes, as pure decisions (issue 36): a store reads what
/// a decision takes, in the write's transaction (PostgreSQL: the user's row locked first), calls
/// it, and applies the `MailCodeWrites` it returns, or throws the `IdentityError` it throws.
/// Nothing here reads a clock: `now` is given.
public enum MailCodeRules {
    /// The short rate window: a minute, in milliseconds.
    public static let minuteWindow: Int64 = 60_000
    /// The long rate window: an hour, in milliseconds.
    public static let hourWindow: Int64 = 3_600_000
    /// How long a user's reset rows are kept for the limits: a day, in milliseconds.
    public static let resetRowsKept: Int64 = 86_400_000

    /// The creation time (milliseconds; a code made exactly then is out) after which a store reads
    /// the user's codes for the limits: one hour before `now`.
    public static func recentSince(_ now: Date) -> Int64 {
        now.millisecondsSince1970 - hourWindow
    }

    /// Seconds until one more code is allowed, nil when one is allowed now: with `perMinute`
    /// (`perHour`) codes or more made in the last minute (hour), until the one that fills the
    /// window leaves it (a code made at `t` is in the window until `t + window`, exclusive). A limit
    /// below 1 counts as 1. `made`: the creation times (milliseconds) of the user's recent codes,
    /// voided ones included, in any order.
    public static func retryAfterSeconds(made: [Int64], now: Date, perMinute: Int, perHour: Int) -> Int? {
        let nowMs = now.millisecondsSince1970
        let sorted = made.sorted()
        let wait = max(wait(sorted, now: nowMs, limit: perMinute, window: minuteWindow), wait(sorted, now: nowMs, limit: perHour, window: hourWindow))
        return wait > 0 ? Int((wait + 999) / 1000) : nil
    }

    /// Milliseconds until fewer than `limit` of `sorted` (oldest first) fall in the last `window`.
    static func wait(_ sorted: [Int64], now: Int64, limit: Int, window: Int64) -> Int64 {
        let inWindow = sorted.filter { $0 > now - window }
        let limit = max(1, limit)
        guard inWindow.count >= limit else { return 0 }
        return max(1, inWindow[inWindow.count - limit] + window - now)
    }

    // MARK: Password reset

    /// A reset code asked for the normalized address `email` of `user` (nil: no such user):
    /// `noAccount` (nothing written) when the user is gone, disabled or no longer at `email`;
    /// `limited` when `perMinute` codes or more were made in the last minute or `perHour` in the
    /// last hour (`recentCodes`: the creation times of its codes since `recentSince(now)`, voided
    /// ones included; a limit of 0 allows none); otherwise `queued`: the older unused codes
    /// voided, `code` stored, `mail` queued. Both of the last two delete the user's reset rows
    /// older than a day.
    public static func requestPasswordReset<Mail>(
        user: MailCodeUser?, email: String, recentCodes: [Int64], code: NewResetCode, mail: Mail, now: Date, perMinute: Int,
        perHour: Int
    ) -> (outcome: PasswordResetOutcome, writes: MailCodeWrites<Mail>?) {
        guard let user, user.takesCodes(at: email) else { return (.noAccount, nil) }
        let nowMs = now.millisecondsSince1970
        var writes = MailCodeWrites<Mail>(userID: user.id)
        writes.purgeResetsCreatedBefore = nowMs - resetRowsKept
        let inMinute = recentCodes.filter { $0 > nowMs - minuteWindow }.count
        let inHour = recentCodes.filter { $0 > nowMs - hourWindow }.count
        if inMinute >= perMinute || inHour >= perHour { return (.limited, writes) }
        writes.voidResets = true
        writes.newResetCode = code
        writes.mail = mail
        return (.queued, writes)
    }

    /// Uses the reset code `code` (the row with the given hash, nil: none) for `userID` (`user`:
    /// its row): `invalidResetCode` unless the code is that user's, unused and unexpired and the
    /// user exists and is enabled. Otherwise the code is used, the user's other reset codes and
    /// pending email changes voided (a change asked from a session the reset ends must not
    /// complete after it), and the password set with the address verified (the code was mailed
    /// to it).
    public static func usePasswordReset<Mail>(
        code: StoredResetCode?, userID: UserID, user: MailCodeUser?, passwordHash: String, now: Date
    ) throws(IdentityError) -> MailCodeWrites<Mail> {
        guard let code, code.userID == userID, code.isLive(at: now) else { throw .invalidResetCode }
        guard let user, !user.disabled else { throw .invalidResetCode }
        var writes = passwordChanged(userID: user.id) as MailCodeWrites<Mail>
        writes.useResetCode = code.id
        writes.password = .reset(hash: passwordHash)
        return writes
    }

    /// The user's password changed: its unused reset codes and pending email changes are voided
    /// (a code mailed before must not outlive the credentials it was sent for).
    public static func passwordChanged<Mail>(userID: UserID) -> MailCodeWrites<Mail> {
        var writes = MailCodeWrites<Mail>(userID: userID)
        writes.voidResets = true
        writes.voidEmailActions = [.changeEmail]
        return writes
    }

    /// An operator set the user's address or password: its unused reset codes and pending email
    /// changes and verifications are voided. Revert codes stay: they are the previous address
    /// owner's way back.
    public static func operatorChangedCredentials<Mail>(userID: UserID) -> MailCodeWrites<Mail> {
        var writes = MailCodeWrites<Mail>(userID: userID)
        writes.voidResets = true
        writes.voidEmailActions = [.changeEmail, .verifyEmail]
        return writes
    }

    // MARK: Operator's link codes

    /// A `kind` code for a link the operator hands over (no mail, no limits): `userNotFound` when
    /// `user` is gone, disabled or no longer at `emailNormalized`; otherwise the user's unused
    /// codes of that kind are voided and the code (`codeHash`, until `expiresAt`) stored.
    public static func linkCode<Mail>(
        _ kind: LinkCodeKind, user: MailCodeUser?, email: String, emailNormalized: String, codeHash: Data, expiresAt: Date
    ) throws(IdentityError) -> MailCodeWrites<Mail> {
        guard let user, user.takesCodes(at: emailNormalized) else { throw .userNotFound }
        var writes = MailCodeWrites<Mail>(userID: user.id)
        switch kind {
        case .passwordReset:
            writes.voidResets = true
            writes.newResetCode = NewResetCode(codeHash: codeHash, expiresAt: expiresAt)
        case .verifyEmail:
            writes.voidEmailActions = [.verifyEmail]
            writes.newEmailAction = NewEmailAction(
                purpose: .verifyEmail, codeHash: codeHash, email: email, emailNormalized: emailNormalized, expiresAt: expiresAt)
        }
        return writes
    }
}
