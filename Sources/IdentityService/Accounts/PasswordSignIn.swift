import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import RPCRouting

// A sign-in races the changes that end access. A password change (or a disable, or a deletion)
// writes the user and then revokes the user's sessions; a sign-in that verified the old
// password just before may ask for its session just after that revocation, and the session
// would outlive the change. So every sign-in by password re-reads the user once its session
// exists: a change that raced it is then visible (it was written before its revocation ran),
// and the new session is revoked again before anyone sees it.

/// Password checks under the throttles, and the end of every sign-in (password, provider,
/// migration): the stamp, the hash upgrade, the session and its confirmation.
struct PasswordSignIn: IdentityFeature {
    let basics: HandlerBasics
    let store: any UserStore
    let passwords: NewPasswords
    /// Throttles password checks per account and client address: guesses from one address wait
    /// after `threshold` failures without slowing the owner elsewhere.
    let throttle: PasswordAttemptThrottle
    /// Throttles password checks per account from all addresses together, at ten times the
    /// threshold (`PasswordAttemptThrottle.Settings.accountWide`).
    let accountThrottle: PasswordAttemptThrottle
    /// `GATEHOUSE_EMAIL_VERIFICATION=required`: no session before the address is verified.
    let verificationRequired: Bool

    /// The user whose email and password these are, its stored hash and the password as
    /// normalized; `invalidCredentials` for an unknown email or a wrong password alike (after
    /// `unknownEmail` is called for the first, at the same cost).
    func checkPassword(
        _ typed: String, email: EmailAddress, deadline hashDeadline: ContinuousClock.Instant?, unknownEmail: () -> Void = {}
    ) async throws -> (UserRecord, String, String) {
        if typed.isEmpty || passwords.policy.isObviouslyTooLong(typed) { throw IdentityError.invalidCredentials }
        let password = PasswordPolicy.normalize(typed)
        guard password.unicodeScalars.count <= passwords.policy.maxLength else { throw IdentityError.invalidCredentials }
        let found = try await store.user(normalizedEmail: email.normalized)
        if let found { auditUser(found.id) }
        guard let user = found, let stored = user.passwordHash else {
            _ = try await passwords.hasher.verifyDummy(password, deadline: hashDeadline)
            if found == nil { unknownEmail() }
            throw IdentityError.invalidCredentials
        }
        var matched = try await passwords.hasher.verify(password, against: stored, deadline: hashDeadline)
        if !matched, password != typed, !stored.hasPrefix("$argon2id$") {
            // An imported hash may have been made from the password as typed, before NFKC.
            matched = try await passwords.hasher.verify(typed, against: stored, deadline: hashDeadline)
        }
        guard matched else { throw IdentityError.invalidCredentials }
        return (user, stored, password)
    }

    /// `checkPassword` under both throttles (sign-in, re-authentication and an anonymous
    /// caller's sign-in share them): the address's attempt counts only once the account-wide one
    /// is allowed, and one refused by the address's throttle is given back to the account-wide one.
    func checkPasswordThrottled(
        _ typed: String, email: EmailAddress, client: ClientInfo, deadline hashDeadline: ContinuousClock.Instant?,
        unknownEmail: () -> Void = {}
    ) async throws -> (UserRecord, String, String) {
        try await accountThrottle.guarding(accountThrottle.key(normalizedEmail: email.normalized)) {
            try await throttle.guarding(throttle.key(normalizedEmail: email.normalized, client: client.ip)) {
                try await checkPassword(typed, email: email, deadline: hashDeadline, unknownEmail: unknownEmail)
            }
        }
    }

    /// Completes a sign-in of `user`, whose password was verified against its hash `verified`:
    /// with `password` (the verified one) an outdated hash is upgraded (not when the hash pool is
    /// busy: at a later sign-in), the sign-in recorded, and the session issued and confirmed
    /// (`issueConfirmedSession`). Returns the user as signed in and the session.
    func completeSignIn(
        _ user: UserRecord, verified: String?, password: String?, client: ClientInfo,
        hashDeadline: ContinuousClock.Instant?, deadline: ContinuousClock.Instant?, amr: [String] = ["pwd"]
    ) async throws -> (UserRecord, SessionTokens) {
        let at = clock.now
        var upgraded: String?
        if let password, let verified, passwords.hasher.needsRehash(verified) {
            do {
                upgraded = try await passwords.hasher.hash(password, deadline: hashDeadline)
            } catch IdentityError.overloaded {
                upgraded = nil  // upgrade at a later sign-in
            }
        }
        try await store.recordSignIn(id: user.id, at: at, newPasswordHash: upgraded, replacing: verified)
        var signedIn = user
        signedIn.lastSignInAt = at.roundedToMilliseconds
        let tokens = try await issueConfirmedSession(
            for: signedIn, at: at, client: client, verified: verified, upgraded: upgraded, amr: amr, deadline: deadline)
        return (signedIn, tokens)
    }

    /// Issues a session for `user`, signed in on the strength of the password hash `verified`
    /// (`upgraded`: the rehash this sign-in stored, if any), then re-reads the user. When the
    /// user is gone, disabled, or has another password hash by then, the session is revoked
    /// (committed; reason `credentials_changed`) and the sign-in answers `invalidCredentials` or
    /// `userDisabled` as if it had come after the change.
    func issueConfirmedSession(
        for user: UserRecord, at: Date, client: ClientInfo, verified: String?, upgraded: String? = nil, amr: [String] = ["pwd"],
        deadline: ContinuousClock.Instant?
    ) async throws -> SessionTokens {
        let tokens = try await issueSession(for: user, at: at, client: client, amr: amr, deadline: deadline)
        let now = try await store.user(id: user.id)
        let refusal: IdentityError?
        switch now {
        case nil: refusal = .invalidCredentials
        case let now? where now.disabled: refusal = .userDisabled
        case let now? where now.passwordHash != verified && (upgraded == nil || now.passwordHash != upgraded): refusal = .invalidCredentials
        default: refusal = nil
        }
        guard let refusal else { return tokens }
        // Without the caller's deadline: this revocation must not be cut short.
        _ = try await self.tokens.call(TokenAPI.revokeSession, RevokeSessionRequest(sessionID: tokens.sessionID, reason: "credentials_changed"))
        throw refusal
    }

    /// Records a sign-in of `target`, whose credentials were verified, and issues its session
    /// (`amr`: `["pwd"]`, or the provider for a provider sign-in).
    func signInVerified(
        _ target: UserRecord, client: ClientInfo, amr: [String] = ["pwd"], deadline: ContinuousClock.Instant?
    ) async throws -> (User, SessionTokens) {
        let (signedIn, tokens) = try await completeSignIn(
            target, verified: target.passwordHash, password: nil, client: client, hashDeadline: nil, deadline: deadline, amr: amr)
        return (User(signedIn), tokens)
    }

    /// Under `required`: `emailNotVerified` for a user whose address is not verified (called only
    /// after the user's password checked out, so it reveals nothing to someone without it).
    func requireVerifiedEmail(_ user: UserRecord) throws {
        if verificationRequired, !user.isAnonymous, !user.emailVerified { throw IdentityError.emailNotVerified }
    }
}

/// A feature that signs users in: the `PasswordSignIn` steps, as its own.
protocol SignsInUsers: IdentityFeature {
    var signIns: PasswordSignIn { get }
}

extension SignsInUsers {
    func checkPasswordThrottled(
        _ typed: String, email: EmailAddress, client: ClientInfo, deadline hashDeadline: ContinuousClock.Instant?,
        unknownEmail: () -> Void = {}
    ) async throws -> (UserRecord, String, String) {
        try await signIns.checkPasswordThrottled(typed, email: email, client: client, deadline: hashDeadline, unknownEmail: unknownEmail)
    }

    func completeSignIn(
        _ user: UserRecord, verified: String?, password: String?, client: ClientInfo,
        hashDeadline: ContinuousClock.Instant?, deadline: ContinuousClock.Instant?, amr: [String] = ["pwd"]
    ) async throws -> (UserRecord, SessionTokens) {
        try await signIns.completeSignIn(
            user, verified: verified, password: password, client: client, hashDeadline: hashDeadline, deadline: deadline, amr: amr)
    }

    func issueConfirmedSession(
        for user: UserRecord, at: Date, client: ClientInfo, verified: String?, upgraded: String? = nil, amr: [String] = ["pwd"],
        deadline: ContinuousClock.Instant?
    ) async throws -> SessionTokens {
        try await signIns.issueConfirmedSession(
            for: user, at: at, client: client, verified: verified, upgraded: upgraded, amr: amr, deadline: deadline)
    }

    func signInVerified(
        _ target: UserRecord, client: ClientInfo, amr: [String] = ["pwd"], deadline: ContinuousClock.Instant?
    ) async throws -> (User, SessionTokens) {
        try await signIns.signInVerified(target, client: client, amr: amr, deadline: deadline)
    }

    func requireVerifiedEmail(_ user: UserRecord) throws {
        try signIns.requireVerifiedEmail(user)
    }
}
