import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import RPCRouting

/// The self-service account methods (issue 18 §4–§6): re-authentication, password and email
/// changes, and deleting one's own account. Each acts on the `AuthenticatedCaller` the gateway
/// verified from the access token, never on a user id the client chose.
extension IdentityHandlers {
    /// Registers `identity.reauthenticate`, `changePassword`, `changeEmail` and `deleteAccount`.
    func registerAccountMethods(_ router: inout RPCRouter) {
        router.register(IdentityAPI.reauthenticate) { request, context in try await reauthenticate(request, deadline: context.deadline) }
        router.register(IdentityAPI.changePassword) { request, context in try await changePassword(request, deadline: context.deadline) }
        router.register(IdentityAPI.changeEmail) { request, _ in try await changeEmail(request) }
        router.register(IdentityAPI.deleteAccount) { request, context in try await deleteAccount(request, deadline: context.deadline) }
    }

    /// The recent-login gate: `requires_recent_login` unless the caller authenticated (its
    /// session's `auth_time`) at most `recentLoginWindow` seconds ago. A window of 0 refuses always.
    public func requireRecentLogin(_ caller: AuthenticatedCaller) throws {
        let age = clock.now.timeIntervalSince(caller.authTime)
        guard recentLoginWindow > 0, age <= recentLoginWindow else {
            throw IdentityError.requiresRecentLogin(windowSeconds: Int(recentLoginWindow.rounded(.up)))
        }
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
        let hashDeadline = Self.hashDeadline(deadline)
        try Self.checkClient(request.client)
        let current = try await callerUser(request.caller)
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
        let current = try await callerUser(request.caller)
        guard !current.isAnonymous else {
            throw IdentityError.invalidArgument(
                field: "password", reason: "an anonymous user has no email: register an email and password with POST /v1/me/upgrade")
        }
        guard let email = current.emailNormalized else {
            throw IdentityError.invalidArgument(
                field: "password", reason: "this account has no email address (its provider sent none), so it cannot have a password: link another provider instead")
        }
        try requireRecentLogin(request.caller)
        let password = try policy.validate(request.password, email: email)
        let hash = try await hasher.hash(password, deadline: Self.hashDeadline(deadline))
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
        let id = try Self.validCaller(request.caller)
        try Self.checkClient(request.client)
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

    // MARK: Helpers

    /// The caller's user id, checked for shape (and its session id).
    static func validCaller(_ caller: AuthenticatedCaller) throws -> UserID {
        guard UserID.isWellFormed(caller.userID) else {
            throw IdentityError.invalidArgument(field: "caller.userID", reason: "not a user id")
        }
        guard !caller.sessionID.isEmpty, caller.sessionID.utf8.count <= 64 else {
            throw IdentityError.invalidArgument(field: "caller.sessionID", reason: "must be 1 to 64 bytes")
        }
        return UserID(caller.userID)
    }

    /// The caller's stored user; `userNotFound` when it is gone.
    func callerUser(_ caller: AuthenticatedCaller) async throws -> UserRecord {
        guard let user = try await store.user(id: try Self.validCaller(caller)) else { throw IdentityError.userNotFound }
        return user
    }

    /// Revokes every session of `id` but `except` in the token service (committed before the
    /// reply); the ids of the sessions whose access tokens the gateway must refuse.
    func revokeSessionIDs(of id: UserID, reason: String, except: String?) async throws -> [String] {
        let request = UserSessionsRequest(userID: id.rawValue, reason: reason, exceptSessionID: except)
        return try await tokens.call(TokenAPI.revokeAllSessions, request).sessionIDs
    }

    /// Runs `write` (a new password) between two revocations of every session of `id` but
    /// `except`, each committed in the token service: a failure before the write changes nothing
    /// but revokes, and a session a racing sign-in made before the write is caught by the second
    /// (one made after it sees the new hash: `issueConfirmedSession`). Returns `write`'s result and
    /// the ids of both revocations, for the gateway. Once `write` is done the change happened:
    /// a failing second revocation is tried `secondRevocationAttempts` times, then logged as an
    /// error and the change answered as done with what the first revoked (never an error after
    /// the password changed, which a client would take for "nothing changed").
    func revokingSessions<T>(
        of id: UserID, reason: String, except: String? = nil, around write: () async throws -> T
    ) async throws -> (T, [String]) {
        var revoked = try await revokeSessionIDs(of: id, reason: reason, except: except)
        let result = try await write()
        for attempt in 1...Self.secondRevocationAttempts {
            do {
                for session in try await revokeSessionIDs(of: id, reason: reason, except: except) where !revoked.contains(session) {
                    revoked.append(session)
                }
                break
            } catch {
                guard attempt < Self.secondRevocationAttempts else {
                    logger.error(
                        "the second revocation of user \(id.rawValue)'s sessions (\(reason)) failed \(attempt) times after the change was written; a session a racing sign-in made before the write lives until it expires or is revoked: \(error)")
                    break
                }
                try? await Task.sleep(for: .milliseconds(50 * attempt * attempt))
            }
        }
        return (result, revoked)
    }

    /// How often the revocation after a credential change is tried before the change is answered anyway.
    static let secondRevocationAttempts = 3
}
