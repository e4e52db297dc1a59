import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import RPCRouting

/// The confirmed email change (issue 19 §4). `changeEmail` leaves the user as it is and mails a
/// code to the new address; `confirmEmailChange` applies the change with that code (the new
/// address verified) and mails the old address a notice with a revert code;
/// `revertEmailChange` restores the old address with it and revokes every session of the user.
/// Codes are 32 random bytes (base64url), stored as their SHA-256, never logged.
public struct EmailChangeHandlers: IdentityFeature {
    let basics: HandlerBasics
    let store: any UserStore & EmailCodeStore
    /// The mails, their codes' lifetimes and the per-user limits.
    let mail: MailParts

    /// Registers `identity.changeEmail`, `identity.confirmEmailChange` and `identity.revertEmailChange`.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.changeEmail) { request, _ in try await changeEmail(request) }
        router.register(IdentityAPI.confirmEmailChange) { request, _ in try await confirmEmailChange(request) }
        router.register(IdentityAPI.revertEmailChange) { request, _ in try await revertEmailChange(request) }
    }

    /// Asks to change the caller's email address (recent login required). The same address as
    /// typed: nothing changes. The same address in another case (the same mailbox): applied at
    /// once, `user.email_changed` published. Otherwise, in one transaction, a `change_email` code
    /// is stored (older ones voided) and its mail queued to the new address; the user is
    /// unchanged and the reply names the pending address (`pendingEmail`, `pendingExpiresIn`).
    /// `invalidEmail`; `emailExists` (the address has another account); `mailRateLimited` past
    /// `mail.emailFlows.perMinute`/`perHour` change mails; an anonymous caller: `invalidArgument`.
    public func changeEmail(_ request: ChangeEmailRequest) async throws -> CredentialChangeResponse {
        let current = try await store.callerUser(request.caller)
        guard !current.isAnonymous, let currentEmail = current.email, current.emailNormalized != nil else {
            throw IdentityError.invalidArgument(
                field: "email", reason: "an anonymous user has no email: register an email and password with POST /v1/me/upgrade")
        }
        try requireRecentLogin(request.caller)
        let email = try EmailAddress(request.email)
        try IdentityInput.checkClient(request.client)
        let preferences = try IdentityInput.emailChangeLocale(request.locale)
        if email.typed == currentEmail { return CredentialChangeResponse(user: User(current)) }
        return try await audited(
            AuditEvent.Kind.emailChangeRequested, userID: current.id.rawValue, email: email.typed, client: request.client,
            sessionID: request.caller.sessionID
        ) { try await changeEmail(current, to: email, preferences: preferences) }
    }

    private func changeEmail(_ current: UserRecord, to email: EmailAddress, preferences: String) async throws -> CredentialChangeResponse {
        guard let currentEmail = current.email, let currentNormalized = current.emailNormalized else { throw IdentityError.userNotFound }
        // The same mailbox (only ASCII letter case differs): applied at once. Addresses equal only
        // after Unicode folding (full-width letters, ...) go through the confirmation like any other.
        if email.normalized == currentNormalized, email.typed.lowercased() == currentEmail.lowercased(),
            email.typed.unicodeScalars.allSatisfy(\.isASCII) {
            AuditScope.current?.update { $0.kind = AuditEvent.Kind.emailChanged }
            let user = try await store.update(id: current.id, expectedVersion: nil, now: clock.now) { $0.email = email.typed }
            await publish(IdentityAPI.Topic.userEmailChanged, user)
            return CredentialChangeResponse(user: User(user))
        }
        let code = IdentityInput.newResetCode()
        let now = clock.now
        let (composer, ttl) = (mail.composer, mail.emailFlows.changeTTL)
        try await store.storeEmailChange(
            userID: current.id, from: currentNormalized, to: email, codeHash: IdentityInput.resetCodeHash(code), expiresAt: now.addingTimeInterval(ttl),
            now: now, perMinute: mail.emailFlows.perMinute, perHour: mail.emailFlows.perHour
        ) { old in
            composer.message(
                .changeEmail, to: email.typed, code: code, ttl: ttl, preferences: preferences, date: now,
                extra: ["oldEmail": old, "newEmail": email.typed])
        }
        logger.info("email change pending: confirmation mail queued", metadata: ["user": "\(current.id.rawValue)"])
        return CredentialChangeResponse(user: User(current), pendingEmail: email.typed, pendingExpiresIn: Int64(ttl.rounded(.up)))
    }

    /// Applies a pending change with the code mailed to the new address: in one transaction the
    /// user's email becomes the new address (verified, version + 1), the code is used, the
    /// user's other change and verify codes and password reset codes are voided, and a
    /// `revert_email` code is stored and its notice (`emailChanged`, in `request.locale`) queued
    /// to the old address. Publishes `user.email_changed`. `invalidEmailChangeCode` for an
    /// unknown, expired, used or superseded code, or when the user's address changed since the
    /// code was made; `emailExists` when the new address got an account meanwhile (the code stays
    /// usable); `userDisabled`.
    public func confirmEmailChange(_ request: EmailCodeRequest) async throws -> EmailCodeResponse {
        try IdentityInput.checkClient(request.client)
        let preferences = try IdentityInput.emailChangeLocale(request.locale)
        guard let codeHash = IdentityInput.resetCodeHash(ifWellFormed: request.code) else { throw IdentityError.invalidEmailChangeCode }
        let revertCode = IdentityInput.newResetCode()
        let now = clock.now
        let (composer, ttl) = (mail.composer, mail.emailFlows.revertTTL)
        let pending = try await store.emailChangeCode(codeHash: codeHash, purpose: .changeEmail, now: now)
        let id = try await audited(
            AuditEvent.Kind.emailChanged, userID: pending?.userID.rawValue ?? "", email: pending?.email ?? "", client: request.client
        ) {
            try await store.confirmEmailChange(
            codeHash: codeHash, revertCodeHash: IdentityInput.resetCodeHash(revertCode), revertExpiresAt: now.addingTimeInterval(ttl), now: now
        ) { old, new in
            composer.message(
                .emailChanged, to: old, code: revertCode, ttl: ttl, preferences: preferences, date: now,
                extra: ["oldEmail": old, "newEmail": new])
            }
        }
        guard let user = try await store.user(id: id) else { throw IdentityError.userNotFound }
        await publish(IdentityAPI.Topic.userEmailChanged, user)
        logger.info("email change confirmed: notice with a revert code queued to the old address", metadata: ["user": "\(id.rawValue)"])
        return EmailCodeResponse(user: User(user))
    }

    /// Undoes a confirmed change with the code mailed to the old address: the code is checked
    /// first (`invalidEmailChangeCode`; `emailExists` when the old address has another account
    /// now; `userDisabled`), so a wrong code revokes nothing. Then every session of the user is
    /// revoked (reason `email_reverted`, committed in the token service) around one transaction
    /// that restores the old address (verified: the click proves the mailbox), uses the code and
    /// voids the user's change, verify, later revert and password reset codes. Publishes
    /// `user.email_changed`; the reply names the revoked sessions for the gateway.
    public func revertEmailChange(_ request: EmailCodeRequest) async throws -> EmailCodeResponse {
        try IdentityInput.checkClient(request.client)
        let now = clock.now
        guard let codeHash = IdentityInput.resetCodeHash(ifWellFormed: request.code),
            let code = try await store.emailChangeCode(codeHash: codeHash, purpose: .revertEmail, now: now),
            let user = try await store.user(id: code.userID)
        else { throw IdentityError.invalidEmailChangeCode }
        guard !user.disabled else { throw IdentityError.userDisabled }
        if let holder = try await store.user(normalizedEmail: code.emailNormalized), holder.id != user.id { throw IdentityError.emailExists }
        // The password ends too (a takeover usually set its own): a reset mail to the restored
        // address, in the revert's transaction, lets the owner set a new one.
        let resetCode = IdentityInput.newResetCode()
        let (composer, resetTTL, preferences) = (mail.composer, mail.passwordReset.ttl, try IdentityInput.emailChangeLocale(request.locale))
        let reset = RevertPasswordReset(codeHash: IdentityInput.resetCodeHash(resetCode), expiresAt: now.addingTimeInterval(resetTTL)) { to in
            composer.message(.passwordReset, to: to, code: resetCode, ttl: resetTTL, preferences: preferences, date: now)
        }
        let (id, revoked) = try await revokingSessions(of: user.id, reason: "email_reverted") {
            try await audited(AuditEvent.Kind.emailChangeReverted, userID: user.id.rawValue, email: code.email, client: request.client) {
                try await store.revertEmailChange(codeHash: codeHash, now: now, reset: reset)
            }
        }
        guard let reverted = try await store.user(id: id) else { throw IdentityError.userNotFound }
        await publish(IdentityAPI.Topic.userEmailChanged, reverted)
        logger.notice("email change reverted: old address restored, every session revoked", metadata: ["user": "\(id.rawValue)"])
        return EmailCodeResponse(user: User(reverted), revokedSessionIDs: revoked)
    }
}
