import Crypto
import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import Mail
import RPCRouting
import Synchronization

/// Password reset (issue 19 §2, scenario A30). The request answers at once, the same whether or
/// not the address has an account, and the work (look-up, code, mail) happens after the answer.
/// A code is 32 random bytes (base64url); only its SHA-256 is stored; it is never logged.
public struct PasswordResetHandlers: IdentityFeature {
    let basics: HandlerBasics
    let store: any UserStore & PasswordResetStore
    let passwords: NewPasswords
    /// The mail, its code's lifetime and the per-address limits.
    let mail: MailParts

    /// Registers `identity.requestPasswordReset` and `identity.confirmPasswordReset`.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.requestPasswordReset) { request, _ in try requestPasswordReset(request) }
        router.register(IdentityAPI.confirmPasswordReset) { request, context in
            try await confirmPasswordReset(request, deadline: context.deadline)
        }
    }

    /// Checks the email's form (`invalidEmail`) and the client, then answers; the mail is
    /// prepared off the request path (`sendPasswordReset`), so neither the answer nor its timing
    /// says whether the address has an account.
    public func requestPasswordReset(_ request: PasswordResetRequest) throws -> Empty {
        let email = try EmailAddress(request.email)
        try IdentityInput.checkClient(request.client)
        guard request.locale.utf8.count <= 64 else {
            throw IdentityError.invalidArgument(field: "locale", reason: "longer than 64 bytes")
        }
        let locale = mail.templates.locale(request.locale)
        MailRequests.afterAnswer(logger: logger, "password reset") { _ = await self.sendPasswordReset(normalizedEmail: email.normalized, locale: locale) }
        return Empty()
    }

    /// The work behind a reset request: for an enabled account with this normalized email, a new
    /// code, its mail in `locale`, the older codes voided, all in one transaction (unless the
    /// address is past its mail limits). nil when it failed (logged, without the code).
    @discardableResult
    public func sendPasswordReset(normalizedEmail: String, locale: String) async -> PasswordResetOutcome? {
        do {
            guard let user = try await store.user(normalizedEmail: normalizedEmail), !user.disabled, !user.isAnonymous,
                let recipient = user.email
            else {
                // The same work as for an account (a code and a rendered mail), thrown away.
                _ = mail.composer.message(
                    .passwordReset, to: "nobody@example.invalid", code: IdentityInput.newResetCode(), ttl: mail.passwordReset.ttl, preferences: locale,
                    date: clock.now)
                return .noAccount
            }
            let code = IdentityInput.newResetCode()
            let now = clock.now
            let settings = mail.passwordReset
            let message = mail.composer.message(.passwordReset, to: recipient, code: code, ttl: settings.ttl, preferences: locale, date: now)
            let outcome = try await store.storePasswordReset(
                userID: user.id, email: normalizedEmail, codeHash: IdentityInput.resetCodeHash(code), expiresAt: now.addingTimeInterval(settings.ttl),
                mail: message, now: now, perMinute: settings.perMinute, perHour: settings.perHour)
            switch outcome {
            case .queued: logger.info("password reset mail queued", metadata: ["user": "\(user.id.rawValue)", "messageId": "\(message.messageID)"])
            case .limited: logger.notice("password reset not sent: the address had one too recently", metadata: ["user": "\(user.id.rawValue)"])
            case .noAccount: break
            }
            return outcome
        } catch {
            logger.warning("password reset request failed: \(error)")
            return nil
        }
    }

    /// Sets a new password with a reset code: `invalidResetCode` for an unknown, expired or used
    /// code (or one voided by a newer request); the policy applies (`weakPassword`, the code stays
    /// usable). Every session of the user is revoked (reason `password_reset`, committed in the
    /// token service) before the new hash is written and again after it, as for a password change.
    public func confirmPasswordReset(
        _ request: ConfirmPasswordResetRequest, deadline: ContinuousClock.Instant? = nil
    ) async throws -> ConfirmPasswordResetResponse {
        try IdentityInput.checkClient(request.client)
        guard let codeHash = IdentityInput.resetCodeHash(ifWellFormed: request.code),
            let found = try await store.passwordResetUser(codeHash: codeHash, now: clock.now),
            let user = try await store.user(id: found.0)
        else { throw IdentityError.invalidResetCode }
        let (userID, email) = found
        guard !user.disabled else { throw IdentityError.userDisabled }
        let password = try passwords.policy.validate(request.password, email: email)
        let hash = try await passwords.hasher.hash(password, deadline: IdentityInput.hashDeadline(deadline))
        let at = clock.now
        let (_, revoked) = try await revokingSessions(of: userID, reason: "password_reset") {
            try await audited(AuditEvent.Kind.passwordReset, userID: userID.rawValue, email: user.email ?? "", client: request.client) {
                try await store.usePasswordReset(codeHash: codeHash, userID: userID, passwordHash: hash, now: at)
            }
        }
        await publish(IdentityAPI.Topic.userUpdated, UserEvent(userID: userID.rawValue, version: user.version + 1, occurredAt: at))
        logger.info("password reset confirmed", metadata: ["user": "\(userID.rawValue)"])
        return ConfirmPasswordResetResponse(revokedSessionIDs: revoked)
    }
}

/// The work of requests by address (password reset, email verification), done after the answer.
enum MailRequests {
    /// Mail requests by address (password reset, email verification) whose work (after the
    /// answer) is still running, in this process.
    static let pendingMailRequests = Mutex<Int>(0)
    /// Past this many pending, a request is answered the same but its work is dropped (logged at
    /// warning): a flood from many addresses cannot pile up unbounded work.
    static let maxPendingMailRequests = 1024

    /// Runs `work` after the answer of a request by address is on its way: a short random pause
    /// first (measured on 2 cores, work started at once slowed the answers of known emails by
    /// ~60 µs against unknown ones), at most `maxPendingMailRequests` at once (past that the work
    /// of `what` is dropped and logged; the answer is the same).
    static func afterAnswer(logger: Logger, _ what: String, _ work: @escaping @Sendable () async -> Void) {
        let admitted = Self.pendingMailRequests.withLock { pending in
            guard pending < Self.maxPendingMailRequests else { return false }
            pending += 1
            return true
        }
        guard admitted else {
            logger.warning("\(what) dropped: \(Self.maxPendingMailRequests) requests are still being prepared")
            return
        }
        Task.detached(priority: .utility) {
            try? await Task.sleep(for: .milliseconds(Int.random(in: 20...80)))
            await work()
            Self.pendingMailRequests.withLock { $0 -= 1 }
        }
    }
}
