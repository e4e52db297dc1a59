import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import RPCRouting

/// Sign-up (with a password or anonymous), sign-in, the current user and its profile, and the
/// self-service account methods (issue 18 §4–§6): re-authentication, password change and
/// deleting one's own account. The self-service methods act on the `AuthenticatedCaller` the
/// gateway verified from the access token, never on a user id the client chose.
public struct AccountHandlers: SignsInUsers {
    let basics: HandlerBasics
    let store: any UserStore & PasswordResetStore
    let signIns: PasswordSignIn
    let passwords: NewPasswords
    /// The settings every new user gets (`GATEHOUSE_DEFAULT_SETTINGS`).
    let defaultSettingsJSON: String
    /// Mails the verification at sign-up when the operator asks for one.
    let signUpMail: VerificationMail
    /// An anonymous caller's sign-in is a migration.
    let migration: MigrationHandlers

    /// Registers sign-up, sign-in, the profile update and the self-service account methods.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.signUp) { request, context in try await signUp(request, deadline: context.deadline) }
        router.register(IdentityAPI.signIn) { request, context in try await signIn(request, deadline: context.deadline) }
        router.register(IdentityAPI.signInAnonymously) { request, context in try await signInAnonymously(request, deadline: context.deadline) }
        router.register(IdentityAPI.updateProfile) { request, _ in try await updateProfile(request) }
        router.register(IdentityAPI.reauthenticate) { request, context in try await reauthenticate(request, deadline: context.deadline) }
        router.register(IdentityAPI.changePassword) { request, context in try await changePassword(request, deadline: context.deadline) }
        router.register(IdentityAPI.deleteAccount) { request, context in try await deleteAccount(request, deadline: context.deadline) }
    }

    /// Creates a user, then asks the token service for a session. With a `deadline` (the RPC
    /// caller's), a hash that could not be done in time is refused as `overloaded` at once, and
    /// the token service gets what is left of it.
    public func signUp(_ request: SignUpRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        try await audited(AuditEvent.Kind.signUp, client: request.client) {
            try await signUpAudited(request, deadline: deadline)
        }
    }

    private func signUpAudited(_ request: SignUpRequest, deadline: ContinuousClock.Instant?) async throws -> AuthResponse {
        let email = try EmailAddress(request.email)
        auditEmail(email)
        let displayName = try IdentityInput.validDisplayName(request.displayName)
        try IdentityInput.checkClient(request.client)
        try IdentityInput.checkLocale(request.locale)
        let password = try passwords.policy.validate(request.password, email: email.normalized)
        // Cheap early answer for a taken email (the insert still decides under races).
        if try await store.user(normalizedEmail: email.normalized) != nil { throw IdentityError.emailExists }
        let hash = try await passwords.hasher.hash(password, deadline: IdentityInput.hashDeadline(deadline))
        let at = clock.now
        let verifyFirst = signIns.verificationRequired
        let user = UserRecord(
            id: .random(), email: email, displayName: displayName, passwordHash: hash, settingsJSON: defaultSettingsJSON,
            createdAt: at, lastSignInAt: verifyFirst ? nil : at)
        auditUser(user.id)
        try await signUpMail.insertSigningUp(user, email: email, locale: request.locale)
        await publish(IdentityAPI.Topic.userCreated, user)
        if verifyFirst { return .verificationRequired(user: User(user)) }  // no session until verified
        let tokens = try await issueSession(for: user, at: at, client: request.client, deadline: deadline)
        return AuthResponse(user: User(user), tokens: tokens)
    }

    /// Creates an anonymous user (no email, no password) and a session for it (`amr: ["anon"]`,
    /// the access token carrying `is_anonymous`). Rate-limited per client address at the gateway.
    public func signInAnonymously(_ request: SignInAnonymouslyRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        try IdentityInput.checkClient(request.client)
        let at = clock.now
        let user = UserRecord(
            id: .random(), email: nil, isAnonymous: true, settingsJSON: defaultSettingsJSON, createdAt: at, lastSignInAt: at)
        try await audited(AuditEvent.Kind.signUpAnonymous, userID: user.id.rawValue, client: request.client) {
            try await store.insert(user)
        }
        await publish(IdentityAPI.Topic.userCreated, user)
        let tokens = try await issueSession(for: user, at: at, client: request.client, amr: ["anon"], deadline: deadline)
        return AuthResponse(user: User(user), tokens: tokens)
    }

    /// Verifies email and password, upgrades an outdated hash, then asks for a session (with what
    /// is left of `deadline`, the RPC caller's, when given).
    /// An unknown email costs one hash too, so timing does not reveal whether it exists; both are
    /// counted by `throttle` and `accountThrottle` before the user is looked up, so both are
    /// throttled alike.
    public func signIn(_ request: SignInRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        try await audited(AuditEvent.Kind.signIn, failure: AuditEvent.Kind.signInFailed, client: request.client) {
            try await signInAudited(request, deadline: deadline)
        }
    }

    private func signInAudited(_ request: SignInRequest, deadline: ContinuousClock.Instant?) async throws -> AuthResponse {
        let hashDeadline = IdentityInput.hashDeadline(deadline)
        let email = try EmailAddress(request.email)
        auditEmail(email)
        try IdentityInput.checkClient(request.client)
        if let caller = request.caller, let anonymous = try await migration.anonymousCaller(caller) {
            return try await migration.signIn(request, email: email, from: anonymous, deadline: deadline)
        }
        let (user, stored, password) = try await checkPasswordThrottled(
            request.password, email: email, client: request.client, deadline: hashDeadline)
        guard !user.disabled else { throw IdentityError.userDisabled }
        try requireVerifiedEmail(user)
        let (signedIn, tokens) = try await completeSignIn(
            user, verified: stored, password: password, client: request.client, hashDeadline: hashDeadline, deadline: deadline)
        return AuthResponse(user: User(signedIn), tokens: tokens)
    }

    /// The user with this id (`identity.getUser`).
    public func getUser(_ request: UserIDRequest) async throws -> User {
        let id = try IdentityInput.validID(request.userID)
        let found = try await store.user(id: id)
        return try Self.getUser(request) { _ in found }
    }


    /// Changes display name, photo URL and settings (replaced by `settingsJSON`, or merged with
    /// the RFC 7396 patch `settingsPatchJSON` inside the store's transaction); with
    /// `expectedVersion`, only if nobody else changed the user since.
    public func updateProfile(_ request: UpdateProfileRequest) async throws -> User {
        let id = try IdentityInput.validID(request.userID)
        let displayName = try request.displayName.map { try IdentityInput.validDisplayName($0) }
        let photoURL = try request.photoURL.map { try IdentityInput.validPhotoURL($0) }
        let settings = try request.settingsJSON.map { try IdentityInput.validSettings($0) }
        let patch = try IdentityInput.validSettingsPatch(request.settingsPatchJSON, replacing: settings)
        if let v = request.expectedVersion, v < 1 {
            throw IdentityError.invalidArgument(field: "expectedVersion", reason: "must be 1 or more")
        }
        let user = try await store.update(id: id, expectedVersion: request.expectedVersion, now: clock.now) { user in
            if let displayName { user.displayName = displayName }
            if let photoURL { user.photoURL = photoURL }
            if let settings { user.settingsJSON = settings }
            if let patch { user.settingsJSON = try SettingsDocument.merged(patch, into: user.settingsJSON) }
        }
        await publish(IdentityAPI.Topic.userUpdated, user)
        return User(user)
    }

    /// The claims the token service needs at refresh; `exists = false` for an unknown user.
    public func claimsForSession(_ request: ClaimsForSessionRequest) async throws -> UserClaims {
        let found = UserID.isWellFormed(request.userID) ? try await store.user(id: UserID(request.userID)) : nil
        return try Self.claimsForSession(request) { _ in found }
    }

    /// A strength score and whether `policy` would accept the password (`identity.passwordStrength`).
    public func passwordStrength(_ request: PasswordStrengthRequest) -> PasswordStrengthResponse {
        Self.passwordStrength(request, policy: passwords.policy)
    }

    /// A strength score and whether `policy` would accept the password.
    static func passwordStrength(_ request: PasswordStrengthRequest, policy: PasswordPolicy) -> PasswordStrengthResponse {
        let email = EmailAddress.normalize(request.email)
        let inputs = [email, String(request.displayName.prefix(256))].compactMap { $0 }
        let estimate = PasswordStrength.estimate(request.password, userInputs: inputs, maxLength: policy.maxLength)
        let violations = policy.violations(of: request.password, email: email)
        let score = violations.isEmpty ? estimate.score : min(estimate.score, 1)
        return PasswordStrengthResponse(
            score: Int32(score), reasons: estimate.reasons.map { StrengthReason(code: $0.code, message: $0.message) },
            acceptable: violations.isEmpty, violations: violations.map(\.rawValue),
            level: PasswordStrength.Level(score: score, acceptable: violations.isEmpty).rawValue)
    }


    /// `getUser` over a synchronous point read.
    static func getUser(_ request: UserIDRequest, user: (UserID) throws -> UserRecord?) throws -> User {
        let id = try IdentityInput.validID(request.userID)
        guard let found = try user(id) else { throw IdentityError.userNotFound }
        return User(found)
    }

    /// `claimsForSession` over a synchronous point read.
    static func claimsForSession(_ request: ClaimsForSessionRequest, user: (UserID) throws -> UserRecord?) throws -> UserClaims {
        guard UserID.isWellFormed(request.userID), let found = try user(UserID(request.userID)) else { return UserClaims(exists: false) }
        return found.claims
    }


    /// Checks the caller's password again (the caller's own email unless another is given) and
    /// replaces the caller's session with a new one (`amr: ["pwd"]`, fresh `auth_time`): the new
    /// session is issued, then the presented one revoked (reason `reauthenticated`, committed in
    /// the token service) before this returns. Throttled like sign-in, on the same keys.
    /// Another user's valid credentials: `userMismatch`, nothing changes. A caller without a
    /// password (anonymous or provider-only): `invalidCredentials`.
    public func reauthenticate(_ request: ReauthenticateRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        try await audited(
            AuditEvent.Kind.reauthenticate, failure: AuditEvent.Kind.reauthenticateFailed, userID: request.caller.userID,
            client: request.client, sessionID: request.caller.sessionID
        ) { try await reauthenticateAudited(request, deadline: deadline) }
    }

    private func reauthenticateAudited(_ request: ReauthenticateRequest, deadline: ContinuousClock.Instant?) async throws -> AuthResponse {
        let hashDeadline = IdentityInput.hashDeadline(deadline)
        try IdentityInput.checkClient(request.client)
        let current = try await store.callerUser(request.caller)
        guard !current.isAnonymous, let own = current.email else { throw IdentityError.invalidCredentials }
        let email = try EmailAddress(request.email ?? own)
        auditEmail(email)
        let (user, stored, password) = try await checkPasswordThrottled(
            request.password, email: email, client: request.client, deadline: hashDeadline)
        guard user.id == current.id else {
            auditUser(current.id)
            throw IdentityError.userMismatch
        }
        guard !user.disabled else { throw IdentityError.userDisabled }
        let (signedIn, tokens) = try await completeSignIn(
            user, verified: stored, password: password, client: request.client, hashDeadline: hashDeadline, deadline: deadline)
        let replaced = RevokeSessionRequest(sessionID: request.caller.sessionID, reason: "reauthenticated")
        _ = try await self.tokens.call(TokenAPI.revokeSession, replaced)
        return AuthResponse(user: User(signedIn), tokens: tokens)
    }

    /// Sets the caller's password (recent login required): the policy applies (`weakPassword`
    /// with its reasons); a provider-only user gains the provider `password`. Every other session
    /// of the user is revoked (committed in the token service) before the new hash is written and
    /// again after it: a failure before the write changes nothing but revokes, and a sign-in with
    /// the old password racing the change sees the new hash (`issueConfirmedSession`) or is caught
    /// by the second revocation. The caller's session continues.
    /// An anonymous caller (no email): `invalidArgument`, pointing at the upgrade.
    public func changePassword(
        _ request: ChangePasswordRequest, deadline: ContinuousClock.Instant? = nil
    ) async throws -> CredentialChangeResponse {
        let current = try await store.callerUser(request.caller)
        guard !current.isAnonymous else {
            throw IdentityError.invalidArgument(
                field: "password", reason: "an anonymous user has no email: register an email and password with POST /v1/me/upgrade")
        }
        guard let email = current.emailNormalized else {
            throw IdentityError.invalidArgument(
                field: "password", reason: "this account has no email address (its provider sent none), so it cannot have a password: link another provider instead")
        }
        try requireRecentLogin(request.caller)
        let password = try passwords.policy.validate(request.password, email: email)
        let hash = try await passwords.hasher.hash(password, deadline: IdentityInput.hashDeadline(deadline))
        let audit = (kind: AuditEvent.Kind.passwordChanged, user: current.id.rawValue, session: request.caller.sessionID)
        let (user, revoked) = try await revokingSessions(of: current.id, reason: "password_changed", except: request.caller.sessionID) {
            try await audited(audit.kind, userID: audit.user, client: request.client, sessionID: audit.session) {
                let user = try await store.update(id: current.id, expectedVersion: nil, now: clock.now) { $0.passwordHash = hash }
                try await store.voidPasswordResets(userID: user.id, at: clock.now)
                return user
            }
        }
        await publish(IdentityAPI.Topic.userUpdated, user)
        return CredentialChangeResponse(user: User(user), revokedSessionIDs: revoked)
    }

    /// Revokes every session of the caller's user (reason `user_deleted`: the token service also
    /// blanks their client details), deletes the user (its identities cascade), revokes again
    /// (a session a racing sign-in made in between), all committed before this returns, and
    /// publishes `user.deleted`. A failure before the delete leaves the user, its sessions ended. A recent login is required unless the
    /// caller is anonymous. A caller whose user is already gone (a retry after a lost reply)
    /// gets its sessions revoked again and the same answer. With `continueAnonymously`, a new
    /// anonymous user and session follow.
    public func deleteAccount(
        _ request: DeleteAccountRequest, deadline: ContinuousClock.Instant? = nil
    ) async throws -> DeleteAccountResponse {
        let id = try IdentityInput.validCaller(request.caller)
        try IdentityInput.checkClient(request.client)
        if let current = try await store.user(id: id) {
            if !current.isAnonymous { try requireRecentLogin(request.caller) }
            _ = try await revokeSessionIDs(of: id, reason: "user_deleted", except: nil)
            try await audited(AuditEvent.Kind.accountDeleted, userID: id.rawValue, client: request.client, sessionID: request.caller.sessionID) {
                do { try await store.delete(id: id) } catch IdentityError.userNotFound {}  // deleted meanwhile: revoke all the same
            }
        }
        let revoked = try await revokeSessionIDs(of: id, reason: "user_deleted", except: nil)
        // Also on a retry (the user already gone): events are at least once.
        await publish(IdentityAPI.Topic.userDeleted, UserEvent(userID: id.rawValue, version: 0, occurredAt: clock.now))
        var anonymous: AuthResponse?
        if request.continueAnonymously {
            anonymous = try await signInAnonymously(SignInAnonymouslyRequest(client: request.client), deadline: deadline)
        }
        return DeleteAccountResponse(revokedSessionIDs: revoked, anonymous: anonymous)
    }
}
