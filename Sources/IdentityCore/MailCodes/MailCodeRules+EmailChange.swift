import Foundation

// The confirmed email change: a pending change (a `change_email` code and its mail to the new
// address), its confirmation (the new address, a `revert_email` code and its notice to the old
// address), and the revert.
extension MailCodeRules {
    /// A change of `user`'s address (nil: no such user) from the normalized `fromNormalized` to
    /// `email`: `userNotFound`; `userDisabled`; `versionConflict` with the stored version when
    /// the user is no longer at `fromNormalized`; `emailExists` when `addressTaken` (`email` is
    /// another user's, or reserved for another user by an unused revert code);
    /// `mailRateLimited` with the seconds to wait (`retryAfterSeconds` over `recentCodes`, the
    /// creation times of the user's change codes since `recentSince(now)`, voided ones
    /// included). Otherwise the user's unused change codes are voided, the code (`codeHash`,
    /// until `expiresAt`; the user's current address and verified state kept with it) stored,
    /// and `mail(currentTypedEmail)` queued. The user itself is unchanged.
    public static func requestEmailChange<Mail>(
        user: MailCodeUser?, from fromNormalized: String, to email: EmailAddress, addressTaken: Bool, recentCodes: [Int64],
        codeHash: Data, expiresAt: Date, now: Date, perMinute: Int, perHour: Int, mail: (_ currentEmail: String) -> Mail
    ) throws(IdentityError) -> MailCodeWrites<Mail> {
        guard let user else { throw .userNotFound }
        guard !user.disabled else { throw .userDisabled }
        guard user.emailNormalized == fromNormalized, let current = user.email else { throw .versionConflict(current: user.version) }
        if addressTaken { throw .emailExists }
        if let wait = retryAfterSeconds(made: recentCodes, now: now, perMinute: perMinute, perHour: perHour) {
            throw .mailRateLimited(retryAfterSeconds: wait)
        }
        var writes = MailCodeWrites<Mail>(userID: user.id)
        writes.voidEmailActions = [.changeEmail]
        writes.newEmailAction = NewEmailAction(
            purpose: .changeEmail, codeHash: codeHash, email: email.typed, emailNormalized: email.normalized,
            fromEmailNormalized: fromNormalized, previousVerified: user.emailVerified, expiresAt: expiresAt)
        writes.mail = mail(current)
        return writes
    }

    /// Confirms a change with `code` (the row with the given hash, nil: none) of `user` (its
    /// row): `invalidEmailChangeCode` unless it is an unused, unexpired change code;
    /// `userNotFound`; `userDisabled`; `invalidEmailChangeCode` when the user is no longer at the
    /// address the code was made from; `emailExists` when `addressTaken` (the new address is
    /// another user's or reserved; the code stays usable). Otherwise: the old address reserved,
    /// the new one the user's (verified), the code used, the user's other change and verify
    /// codes and its reset codes voided, a revert code for the old address stored
    /// (`revertCodeHash`, until `revertExpiresAt`; the old verified state kept with it), and
    /// `notice(oldEmail, newEmail)` queued (to the old address).
    public static func confirmEmailChange<Mail>(
        code: StoredEmailAction?, user: MailCodeUser?, addressTaken: Bool, revertCodeHash: Data, revertExpiresAt: Date, now: Date,
        notice: (_ oldEmail: String, _ newEmail: String) -> Mail
    ) throws(IdentityError) -> MailCodeWrites<Mail> {
        guard let code, code.isLive(for: .changeEmail, at: now) else { throw .invalidEmailChangeCode }
        guard let user else { throw .userNotFound }
        guard !user.disabled else { throw .userDisabled }
        guard let oldEmail = user.email, let oldNormalized = user.emailNormalized, oldNormalized == code.fromEmailNormalized else {
            throw .invalidEmailChangeCode
        }
        if addressTaken { throw .emailExists }
        var writes = MailCodeWrites<Mail>(userID: code.userID)
        writes.reserveAddress = oldNormalized
        writes.newAddress = AddressWrite(email: code.email, emailNormalized: code.emailNormalized)
        writes.useEmailAction = code.id
        writes.voidEmailActions = [.changeEmail, .verifyEmail]
        writes.voidResets = true
        writes.newEmailAction = NewEmailAction(
            purpose: .revertEmail, codeHash: revertCodeHash, email: oldEmail, emailNormalized: oldNormalized,
            fromEmailNormalized: code.emailNormalized, previousVerified: user.emailVerified, expiresAt: revertExpiresAt)
        writes.mail = notice(oldEmail, code.email)
        return writes
    }

    /// Reverts a confirmed change with `code` (the row with the given hash, nil: none) of `user`
    /// (its row): `invalidEmailChangeCode` unless it is an unused, unexpired revert code;
    /// `userNotFound`; `userDisabled`; `emailExists` when `addressTaken` (the old address is
    /// another user's or reserved for another). Otherwise: the old address restored (verified),
    /// the code used, the user's change and verify codes voided, and so are the revert codes
    /// made AFTER this one (a later change's) and its reset codes. Revert codes made before
    /// this one stay usable: whoever changed the address twice cannot disarm the first owner's
    /// revert with the second one. With `reset`, the password is cleared (whoever took the
    /// account usually set their own), the reset code stored and `reset.mail(restoredEmail)`
    /// queued.
    public static func revertEmailChange<Mail>(
        code: StoredEmailAction?, user: MailCodeUser?, addressTaken: Bool, now: Date,
        reset: (code: NewResetCode, mail: (_ restoredEmail: String) -> Mail)?
    ) throws(IdentityError) -> MailCodeWrites<Mail> {
        guard let code, code.isLive(for: .revertEmail, at: now) else { throw .invalidEmailChangeCode }
        guard let user else { throw .userNotFound }
        guard !user.disabled else { throw .userDisabled }
        if addressTaken { throw .emailExists }
        var writes = MailCodeWrites<Mail>(userID: code.userID)
        writes.newAddress = AddressWrite(email: code.email, emailNormalized: code.emailNormalized)
        writes.useEmailAction = code.id
        writes.voidEmailActions = [.changeEmail, .verifyEmail]
        writes.voidRevertCodesAfter = code.id
        writes.voidResets = true
        if let reset {
            writes.password = .clear
            writes.newResetCode = reset.code
            writes.mail = reset.mail(code.email)
        }
        return writes
    }
}
