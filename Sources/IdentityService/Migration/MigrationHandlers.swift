import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import RPCRouting

// Upgrading an anonymous user in place, and migrating one to an existing account (issue 18 §2,
// §3; seed 002). The anonymous user is deleted only after the target's credentials were verified
// and the target found enabled, and always through the delete path: the users row, then every
// session revoked in the token service (committed before the reply, which names them).

/// An anonymous user's upgrade in place and its migration to an existing account.
public struct MigrationHandlers: SignsInUsers {
    let basics: HandlerBasics
    let store: any UserStore & ChangeLogStore
    let signIns: PasswordSignIn
    let passwords: NewPasswords
    /// The resume handles of `migration_required` answers.
    let resumeHandles: ResumeHandles
    /// Where the handles live when the store shares them between instances.
    let sharedResumeHandles: (any SharedResumeHandles)?
    /// Mails the verification at an upgrade when the operator asks for one.
    let signUpMail: VerificationMail
    /// A provider identity carried by a resume handle.
    let providerLinks: ProviderLinks

    /// Registers `identity.upgradeAnonymous` and `identity.resumeSignIn`.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.upgradeAnonymous) { request, context in try await upgradeAnonymous(request, deadline: context.deadline) }
        router.register(IdentityAPI.resumeSignIn) { request, context in try await resumeSignIn(request, deadline: context.deadline) }
    }

    /// The answer to an upgrade by a caller that is not anonymous.
    static let notAnonymous = IdentityError.invalidArgument(
        field: "caller", reason: "only an anonymous user can be upgraded; change the email or password with PUT /v1/me/email or /v1/me/password")

    /// Gives the anonymous caller an email and a password, keeping its id: it is no longer
    /// anonymous, and gets a new session (`amr: ["pwd"]`, fresh `auth_time`). Its other sessions
    /// stay valid; their access tokens show the new state from their next refresh. A taken email
    /// is `emailExists` and changes nothing (`identity.upgradeAnonymous`).
    public func upgradeAnonymous(_ request: UpgradeAnonymousRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        let id = try IdentityInput.validID(request.caller.userID)
        let email = try EmailAddress(request.email)
        let displayName = try IdentityInput.validDisplayName(request.displayName)
        try IdentityInput.checkClient(request.client)
        try IdentityInput.checkLocale(request.locale)
        let password = try passwords.policy.validate(request.password, email: email.normalized)
        guard let current = try await store.user(id: id) else { throw IdentityError.userNotFound }
        guard current.isAnonymous else { throw Self.notAnonymous }
        // Cheap early answer for a taken email (the update still decides under races).
        if try await store.user(normalizedEmail: email.normalized) != nil { throw IdentityError.emailExists }
        let hash = try await passwords.hasher.hash(password, deadline: IdentityInput.hashDeadline(deadline))
        let at = clock.now
        let audit = (kind: AuditEvent.Kind.anonymousUpgraded, user: id.rawValue)
        let user = try await audited(audit.kind, userID: audit.user, email: email.typed, client: request.client) {
            try await signUpMail.updateUpgrading(id: id, email: email, locale: request.locale, now: at) { user in
            guard user.isAnonymous else { throw Self.notAnonymous }
            user.email = email.typed
            user.emailNormalized = email.normalized
            user.emailVerified = false
            user.passwordHash = hash
            user.isAnonymous = false
            if let displayName { user.displayName = displayName }
            user.lastSignInAt = at.roundedToMilliseconds
            }
        }
        await publish(IdentityAPI.Topic.userUpdated, user)
        let tokens = try await issueSession(for: user, at: at, client: request.client, deadline: deadline)
        return AuthResponse(user: User(user), tokens: tokens)
    }

    /// The caller's user when it exists and is anonymous; nil otherwise (the sign-in is then an
    /// ordinary one).
    func anonymousCaller(_ caller: AuthenticatedCaller) async throws -> UserRecord? {
        guard UserID.isWellFormed(caller.userID), let user = try await store.user(id: UserID(caller.userID)), user.isAnonymous else {
            return nil
        }
        return user
    }

    /// A sign-in by the anonymous caller `anonymous` (`identity.signIn` with a caller): the
    /// password is checked under the same throttles as any sign-in. An email without an account
    /// is `userNotFound` (so the app registers and upgrades instead), a wrong password
    /// `invalidCredentials`; neither touches `anonymous`. Without a decision, `migrationRequired`
    /// with a resume handle; with one, the migration.
    func signIn(
        _ request: SignInRequest, email: EmailAddress, from anonymous: UserRecord, deadline: ContinuousClock.Instant?
    ) async throws -> AuthResponse {
        let hashDeadline = IdentityInput.hashDeadline(deadline)
        var unknownEmail = false
        let target: UserRecord
        do {
            target = try await checkPasswordThrottled(
                request.password, email: email, client: request.client, deadline: hashDeadline
            ) { unknownEmail = true }.0
        } catch IdentityError.invalidCredentials where unknownEmail {
            throw IdentityError.userNotFound
        }
        guard !target.disabled else { throw IdentityError.userDisabled }
        try requireVerifiedEmail(target)
        guard let allowMigration = request.allowMigration else {
            let handle = try await resumeHandles.issue(
                anonymousUserID: anonymous.id, sessionID: request.caller?.sessionID ?? "", target: target, now: clock.now,
                shared: sharedResumeHandles)
            throw IdentityError.migrationRequired(
                anonymousUserID: anonymous.id.rawValue, existingUserID: target.id.rawValue, resumeHandle: handle,
                expiresInSeconds: Int(resumeHandles.ttl.rounded(.up)))
        }
        if let reply = try await migrate(anonymous.id, to: target, performMigration: allowMigration, client: request.client, deadline: deadline) {
            return reply
        }
        // The caller was upgraded meanwhile (not deleted): an ordinary sign-in, as for any caller
        // that is not anonymous.
        let (user, tokens) = try await signInVerified(target, client: request.client, deadline: deadline)
        return AuthResponse(user: user, tokens: tokens)
    }

    /// Resumes a sign-in that answered `migrationRequired` (`identity.resumeSignIn`): the handle
    /// is taken (single use) if it is this caller's, on this session, and unexpired; then the
    /// anonymous user must still be anonymous and the target unchanged and enabled.
    public func resumeSignIn(_ request: ResumeSignInRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        try await audited(
            AuditEvent.Kind.signIn, failure: AuditEvent.Kind.migrationFailed, userID: "", client: request.client,
            sessionID: request.caller.sessionID
        ) { try await resumeSignInAudited(request, deadline: deadline) }
    }

    private func resumeSignInAudited(_ request: ResumeSignInRequest, deadline: ContinuousClock.Instant?) async throws -> AuthResponse {
        try IdentityInput.checkClient(request.client)
        guard UserID.isWellFormed(request.caller.userID),
            let entry = try await resumeHandles.take(
                request.resumeHandle, userID: UserID(request.caller.userID), sessionID: request.caller.sessionID, now: clock.now,
                shared: sharedResumeHandles)
        else { throw IdentityError.invalidResumeHandle }
        auditUser(entry.targetUserID)
        guard let anonymous = try await store.user(id: entry.anonymousUserID), anonymous.isAnonymous,
            let target = try await store.user(id: entry.targetUserID)
        else { throw IdentityError.invalidResumeHandle }
        var amr = ["pwd"]
        if let identity = entry.providerIdentity {
            // A provider sign-in: the identity must still name the target.
            guard try await store.userID(provider: identity.provider, subject: identity.subject) == target.id else {
                throw IdentityError.invalidResumeHandle
            }
            amr = [identity.provider]
        } else {
            guard target.passwordHash == entry.targetPasswordHash else { throw IdentityError.invalidResumeHandle }
            try requireVerifiedEmail(target)
        }
        guard !target.disabled else { throw IdentityError.userDisabled }
        guard
            let reply = try await migrate(
                anonymous.id, to: target, performMigration: request.allowMigration, client: request.client, amr: amr, deadline: deadline)
        else { throw IdentityError.invalidResumeHandle }
        if let identity = entry.providerIdentity {
            try await providerLinks.confirmLinked(reply.tokens, user: target.id, provider: identity.provider, subject: identity.subject)
            if let refresh = identity.appleRefreshToken, let client = identity.appleClientID {
                await providerLinks.keepAppleToken((refresh, client), user: target.id, subject: identity.subject)
            }
        }
        return reply
    }

    /// Deletes the anonymous user through the delete path (the users row, only while it is still
    /// anonymous; then every session revoked and committed in the token service; `user.deleted`),
    /// then signs in to `target`. nil (nothing deleted, no session) when the user was upgraded
    /// meanwhile. An anonymous user already gone (a concurrent migration) is `session_revoked`:
    /// the caller's session went with it.
    func migrate(
        _ anonymousID: UserID, to target: UserRecord, performMigration: Bool, client: ClientInfo, amr: [String] = ["pwd"],
        deadline: ContinuousClock.Instant?
    ) async throws -> AuthResponse? {
        // Reason `migrated` (a deletion reason: the sessions lose their client details), so open
        // streams end as `migrated`; the change log marks the deletion `migrated` too.
        let revoke = UserSessionsRequest(userID: anonymousID.rawValue, reason: "migrated")
        let detail = #"{"anonymousUserId":"\#(anonymousID.rawValue)"}"#
        do {
            try await audited(AuditEvent.Kind.migration, userID: target.id.rawValue, client: client) {
                AuditScope.current?.update { $0.detailJSON = detail }
                try await deleteMigrated(anonymousID)
            }
        } catch IdentityError.userNotFound {
            if try await store.user(id: anonymousID) != nil { return nil }
            _ = try await tokens.call(TokenAPI.revokeAllSessions, revoke)
            throw RPCError(.sessionRevoked, "the anonymous user was deleted meanwhile; sign in again")
        }
        let revoked = try await tokens.call(TokenAPI.revokeAllSessions, revoke)
        await publish(IdentityAPI.Topic.userDeleted, UserEvent(userID: anonymousID.rawValue, version: 0, occurredAt: clock.now))
        let (user, tokens) = try await signInVerified(target, client: client, amr: amr, deadline: deadline)
        let outcome = MigrationOutcome(
            oldUserID: anonymousID.rawValue, newUserID: target.id.rawValue, performMigration: performMigration,
            revokedSessionIDs: revoked.sessionIDs)
        return AuthResponse(user: user, tokens: tokens, migration: outcome)
    }

    /// Deletes the migrated anonymous user; the SQLite store marks its change-log entry `migrated`.
    private func deleteMigrated(_ id: UserID) async throws {
        try await store.deleteMigratedAnonymous(id: id)
    }
}
