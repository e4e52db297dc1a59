import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import Mail
import RPCRouting
import Synchronization

/// Email verification (issue 19 §3). A code (32 random bytes, base64url; only its SHA-256 is
/// stored, in `email_actions`) is mailed for the user's current address: on request by the
/// signed-in user, on request by address (answered at once, like a password reset), and, with
/// `GATEHOUSE_EMAIL_VERIFICATION` send or required, at sign-up and at an anonymous user's upgrade
/// (in the same transaction as the user's insert or upgrade). The code verifies the address only
/// while it is still the user's.
public struct EmailVerificationHandlers: IdentityFeature {
    let basics: HandlerBasics
    let store: any UserStore & EmailCodeStore
    /// Makes the codes and their mail (with their lifetime and per-user limits).
    let mail: VerificationMail

    /// Registers `identity.sendEmailVerification`, `requestEmailVerification` and `confirmEmailVerification`.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.sendEmailVerification) { request, _ in try await sendEmailVerification(request) }
        router.register(IdentityAPI.requestEmailVerification) { request, _ in try requestEmailVerification(request) }
        router.register(IdentityAPI.confirmEmailVerification) { request, _ in try await confirmEmailVerification(request) }
    }

    /// Mails a verification code to the signed-in caller's current address (older codes voided),
    /// within the per-user limits (`mailRateLimited` with the seconds to wait). An anonymous or
    /// email-less caller: `invalidArgument`; a verified address: `emailAlreadyVerified`.
    public func sendEmailVerification(_ request: SendEmailVerificationRequest) async throws -> SendEmailVerificationResponse {
        let current = try await store.callerUser(request.caller)
        try IdentityInput.checkClient(request.client)
        try IdentityInput.checkLocale(request.locale)
        guard !current.isAnonymous, let typed = current.email, let normalized = current.emailNormalized else {
            throw IdentityError.invalidArgument(
                field: "email", reason: "this user has no email address: register one with POST /v1/me/upgrade")
        }
        guard !current.emailVerified else { throw IdentityError.emailAlreadyVerified }
        let now = clock.now
        let pending = mail.pendingVerification(to: typed, normalized: normalized, locale: request.locale, now: now)
        let outcome = try await store.storeEmailVerification(
            userID: current.id, verification: pending, now: now, perMinute: mail.emailFlows.perMinute, perHour: mail.emailFlows.perHour)
        switch outcome {
        case .queued:
            logger.info("email verification mail queued", metadata: ["user": "\(current.id.rawValue)", "messageId": "\(pending.mail.messageID)"])
            return SendEmailVerificationResponse(email: typed, expiresIn: Int64(mail.emailFlows.verificationTTL.rounded(.up)))
        case .limited(let seconds): throw IdentityError.mailRateLimited(retryAfterSeconds: seconds)
        case .alreadyVerified: throw IdentityError.emailAlreadyVerified
        case .noAccount: throw IdentityError.userNotFound  // changed or disabled meanwhile
        }
    }

    /// Checks the email's form (`invalidEmail`) and the client, then answers; the look-up, code
    /// and mail happen after the answer and a random pause (`sendEmailVerification(normalizedEmail:locale:)`),
    /// so neither the answer nor its timing says whether the address has an account or is verified.
    public func requestEmailVerification(_ request: EmailVerificationRequest) throws -> Empty {
        let email = try EmailAddress(request.email)
        try IdentityInput.checkClient(request.client)
        try IdentityInput.checkLocale(request.locale)
        let locale = request.locale
        MailRequests.afterAnswer(logger: logger, "email verification request") { _ = await self.sendEmailVerification(normalizedEmail: email.normalized, locale: locale) }
        return Empty()
    }

    /// The work behind a request by address: for an enabled account with this unverified
    /// address, a new code and its mail (older codes voided), unless past the per-user limits
    /// (then nothing, logged). An unknown or verified address renders a mail and throws it away.
    /// nil when it failed (logged, without the code).
    @discardableResult
    public func sendEmailVerification(normalizedEmail: String, locale: String) async -> EmailVerificationOutcome? {
        do {
            let now = clock.now
            guard let user = try await store.user(normalizedEmail: normalizedEmail), !user.disabled, !user.isAnonymous,
                !user.emailVerified, let typed = user.email
            else {
                // The same work as for an account (a code and a rendered mail), thrown away.
                _ = mail.pendingVerification(to: "nobody@example.invalid", normalized: "nobody@example.invalid", locale: locale, now: now)
                return .noAccount
            }
            let pending = mail.pendingVerification(to: typed, normalized: normalizedEmail, locale: locale, now: now)
            let outcome = try await store.storeEmailVerification(
                userID: user.id, verification: pending, now: now, perMinute: mail.emailFlows.perMinute, perHour: mail.emailFlows.perHour)
            switch outcome {
            case .queued: logger.info("email verification mail queued", metadata: ["user": "\(user.id.rawValue)"])
            case .limited: logger.notice("email verification not sent: the user had one too recently", metadata: ["user": "\(user.id.rawValue)"])
            case .alreadyVerified, .noAccount: break
            }
            return outcome
        } catch {
            logger.warning("email verification request failed: \(error)")
            return nil
        }
    }

    /// Verifies the address of the code's user: `invalidVerificationCode` for an unknown,
    /// expired or used code (or one voided by a newer one), or one mailed to an address the user
    /// no longer has; `userDisabled` for a disabled user. Publishes `user.updated`.
    public func confirmEmailVerification(_ request: EmailCodeRequest) async throws -> EmailCodeResponse {
        try IdentityInput.checkClient(request.client)
        guard let codeHash = IdentityInput.resetCodeHash(ifWellFormed: request.code) else { throw IdentityError.invalidVerificationCode }
        let now = clock.now
        let code = try await store.emailChangeCode(codeHash: codeHash, purpose: .verifyEmail, now: now)
        let (user, changed) = try await audited(
            AuditEvent.Kind.emailVerified, userID: code?.userID.rawValue ?? "", email: code?.email ?? "", client: request.client
        ) { try await store.useEmailVerification(codeHash: codeHash, now: now) }
        if changed {
            await publish(IdentityAPI.Topic.userUpdated, user)
            logger.info("email verified", metadata: ["user": "\(user.id.rawValue)"])
        }
        return EmailCodeResponse(user: User(user))
    }
}

/// The verification code and mail of a new address: sent at sign-up and at an anonymous user's
/// upgrade (in the same transaction as the insert or upgrade) under `send` or `required`, and on
/// request (`EmailVerificationHandlers`).
struct VerificationMail: Sendable {
    let basics: HandlerBasics
    let store: any UserStore & EmailCodeStore
    let mailComposer: MailComposer
    let emailFlows: EmailFlowSettings
    var logger: Logger { basics.logger }

    /// Whether sign-up and upgrade mail a verification (`send` and `required`).
    var mailsVerificationOnSignUp: Bool { emailFlows.verification != .off }

    /// A new verification code for the address `typed` (`normalized`), stored as its hash, and
    /// its mail in the first of `locale`'s languages with templates, made at `now`.
    func pendingVerification(to typed: String, normalized: String, locale: String, now: Date) -> PendingVerification {
        let code = IdentityInput.newResetCode()
        let mail = mailComposer.message(.verifyEmail, to: typed, code: code, ttl: emailFlows.verificationTTL, preferences: locale, date: now)
        return PendingVerification(
            codeHash: IdentityInput.resetCodeHash(code), email: typed, emailNormalized: normalized,
            expiresAt: now.addingTimeInterval(emailFlows.verificationTTL), mail: mail)
    }

    /// Inserts a new user; with `send` or `required`, its verification code and mail in the same
    /// transaction (the mail in the first of `locale`'s languages with templates).
    func insertSigningUp(_ user: UserRecord, email: EmailAddress, locale: String) async throws {
        guard mailsVerificationOnSignUp else { return try await store.insert(user) }
        try await store.insert(
            user, verification: pendingVerification(to: email.typed, normalized: email.normalized, locale: locale, now: user.createdAt))
        logger.info("email verification mail queued at sign-up", metadata: ["user": "\(user.id.rawValue)"])
    }

    /// `store.update`; with `send` or `required`, a verification code and mail for `email` in
    /// the same transaction (an anonymous user's upgrade).
    func updateUpgrading(
        id: UserID, email: EmailAddress, locale: String, now: Date, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        guard mailsVerificationOnSignUp else {
            return try await store.update(id: id, expectedVersion: nil, now: now, change)
        }
        let pending = pendingVerification(to: email.typed, normalized: email.normalized, locale: locale, now: now)
        let user = try await store.update(id: id, now: now, verification: pending, change)
        logger.info("email verification mail queued at upgrade", metadata: ["user": "\(id.rawValue)"])
        return user
    }
}
