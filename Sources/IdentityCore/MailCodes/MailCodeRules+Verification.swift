import Foundation

// Email verification codes (`verify_email`): storing one with its mail, asking for one within
// the limits, and using one.
extension MailCodeRules {
    /// A verification code stored with its mail (sign-up, an upgrade, a request): the user's
    /// unused verification codes are voided, `code` stored, `mail` queued.
    public static func verificationCode<Mail>(userID: UserID, code: NewEmailAction, mail: Mail) -> MailCodeWrites<Mail> {
        var writes = MailCodeWrites<Mail>(userID: userID)
        writes.voidEmailActions = [.verifyEmail]
        writes.newEmailAction = code
        writes.mail = mail
        return writes
    }

    /// After an update that was to give `user` the address `code` verifies (an anonymous user's
    /// upgrade): the code and its mail (`verificationCode`) when the updated user has that
    /// address, nil (nothing more written) when it has not.
    public static func verificationAfterUpdate<Mail>(user: MailCodeUser, code: NewEmailAction, mail: Mail) -> MailCodeWrites<Mail>? {
        guard user.emailNormalized == code.emailNormalized else { return nil }
        return verificationCode(userID: user.id, code: code, mail: mail)
    }

    /// A verification mail asked for `user`'s address `code.emailNormalized` (nil: no such user):
    /// `noAccount` when the user is gone, disabled or no longer at that address;
    /// `alreadyVerified` when it is verified; `limited` with the seconds to wait when the user
    /// reached `perMinute` or `perHour` (`retryAfterSeconds` over `recentCodes`, the creation
    /// times of its verification codes since `recentSince(now)`, voided ones included); otherwise
    /// `queued` with `verificationCode`'s writes. Only `queued` writes anything.
    public static func requestEmailVerification<Mail>(
        user: MailCodeUser?, code: NewEmailAction, mail: Mail, recentCodes: [Int64], now: Date, perMinute: Int, perHour: Int
    ) -> (outcome: EmailVerificationOutcome, writes: MailCodeWrites<Mail>?) {
        guard let user, user.takesCodes(at: code.emailNormalized) else { return (.noAccount, nil) }
        if user.emailVerified { return (.alreadyVerified, nil) }
        if let wait = retryAfterSeconds(made: recentCodes, now: now, perMinute: perMinute, perHour: perHour) {
            return (.limited(retryAfterSeconds: wait), nil)
        }
        return (.queued, verificationCode(userID: user.id, code: code, mail: mail))
    }

    /// Uses the verification code `code` (the row with the given hash, nil: none) of `user` (its
    /// row): `invalidVerificationCode` unless it is an unused, unexpired verification code and
    /// the user exists and still has the code's address; `userDisabled` (the code stays usable)
    /// when the user is disabled. Otherwise every unused verification code of the user, this one
    /// included, is voided, and `markVerified` says whether the store then marks the address
    /// verified (false: it was verified already, nothing else changes).
    public static func useEmailVerification<Mail>(
        code: StoredEmailAction?, user: MailCodeUser?, now: Date
    ) throws(IdentityError) -> (writes: MailCodeWrites<Mail>, markVerified: Bool) {
        guard let code, code.isLive(for: .verifyEmail, at: now), let user, user.id == code.userID,
            user.emailNormalized == code.emailNormalized
        else { throw .invalidVerificationCode }
        guard !user.disabled else { throw .userDisabled }
        var writes = MailCodeWrites<Mail>(userID: user.id)
        writes.voidEmailActions = [.verifyEmail]
        return (writes, !user.emailVerified)
    }
}
