import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import ProviderTokens
import RPCRouting

/// Signing in with a provider (issue 20 §2, §3): every provider token is verified here
/// (`IDTokenVerifier`); a provider name and user id alone are never trusted (scenario A13). The
/// five cases of seed 002 follow from who calls (nobody, an anonymous user, a signed-in user) and
/// whom the identity (provider, subject) is linked to. An email a token carries never links to an
/// existing account by itself: a token whose email belongs to another user is `email_exists`, and
/// the person signs in to that account and links the provider from there.
public struct ProviderHandlers: SignsInUsers {
    /// The ports a provider sign-in uses.
    typealias Store = any UserStore & ProviderLinkStore

    let basics: HandlerBasics
    let store: Store
    let signIns: PasswordSignIn
    /// The identity's link confirmed after the session, Apple's token exchanged and kept.
    let links: ProviderLinks
    /// An anonymous caller whose identity is another user's migrates.
    let migration: MigrationHandlers
    let resumeHandles: ResumeHandles
    let sharedResumeHandles: (any SharedResumeHandles)?
    /// The replay guard of provider tokens when the store shares one between instances.
    let sharedReplayGuard: (any SharedReplayGuard)?
    /// Verifies provider ID tokens (nil: no provider configured, every provider is unknown).
    let verifier: IDTokenVerifier?
    /// The settings every new user gets.
    let defaultSettingsJSON: String

    /// Registers `identity.signInWithProvider`, `unlinkProvider` and `reauthenticateWithProvider`.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.signInWithProvider) { request, context in
            try await signInWithProvider(request, deadline: context.deadline)
        }
        router.register(IdentityAPI.unlinkProvider) { request, _ in try await unlinkProvider(request) }
        router.register(IdentityAPI.reauthenticateWithProvider) { request, context in
            try await reauthenticateWithProvider(request, deadline: context.deadline)
        }
    }

    /// The five cases (see `ProviderSignInRequest`).
    public func signInWithProvider(_ request: ProviderSignInRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AuthResponse {
        let kind = request.caller == nil ? AuditEvent.Kind.signIn : AuditEvent.Kind.providerLinked
        let failure = request.caller == nil ? AuditEvent.Kind.signInFailed : AuditEvent.Kind.providerLinkFailed
        return try await audited(
            kind, failure: failure, userID: request.caller?.userID ?? "", client: request.client, sessionID: request.caller?.sessionID ?? ""
        ) {
            AuditScope.current?.update { $0.detailJSON = Self.providerDetail(request.credential.provider) }
            return try await signInWithProviderAudited(request, deadline: deadline)
        }
    }

    private func signInWithProviderAudited(_ request: ProviderSignInRequest, deadline: ContinuousClock.Instant?) async throws -> AuthResponse {
        try IdentityInput.checkClient(request.client)
        let displayName = try IdentityInput.validDisplayName(request.displayName)
        let storage = store
        let caller = try request.caller.map { caller -> (AuthenticatedCaller, UserID) in (caller, try IdentityInput.validCaller(caller)) }
        if request.linkOnly, caller == nil {
            throw IdentityError.invalidArgument(field: "caller", reason: "linking a provider needs a signed-in user")
        }
        let token = try await verifiedToken(request.credential)
        let provider = request.credential.provider
        let appleToken = request.authorizationCode.isEmpty
            ? nil : try await links.exchangeAppleCode(request.authorizationCode, redirectURI: request.redirectURI, token: token, provider: provider)
        // A refusal drops Apple's token unused (never revoked: revoking one token of an Apple
        // account ends the app's whole authorisation, the user's other links included); a
        // migration_required handle carries it to the resume.
        let reply = try await AppleTokenCarry.$current.withValue(appleToken.map(AppleTokenCarry.init)) {
            try await providerOutcome(request, token: token, caller: caller, displayName: displayName, store: storage, deadline: deadline)
        }
        if let appleToken { await links.keepAppleToken(appleToken, user: UserID(reply.user.id), subject: token.sub) }
        return reply
    }

    /// The five cases, once the token is verified.
    private func providerOutcome(
        _ request: ProviderSignInRequest, token: VerifiedProviderToken, caller: (AuthenticatedCaller, UserID)?, displayName: String?,
        store storage: Store, deadline: ContinuousClock.Instant?
    ) async throws -> AuthResponse {
        let provider = request.credential.provider
        let linked = try await store.userID(provider: provider, subject: token.sub)
        if let (session, callerID) = caller, let current = try await store.user(id: callerID) {
            auditUser(current.id)
            if linked == current.id {
                // Already this user's: a sign-in with it (a link request is told so).
                if request.linkOnly { throw IdentityError.providerAlreadyLinked }
                return try await signInLinked(current, provider: provider, subject: token.sub, displayName: displayName, client: request.client, deadline: deadline)
            }
            if let owner = linked {
                // Case 4 (and a link request of an anonymous user): another account has it.
                guard current.isAnonymous, !request.linkOnly else { throw IdentityError.credentialAlreadyInUse }
                return try await migrateToLinked(
                    owner, from: current, session: session, provider: provider, subject: token.sub, request: request, deadline: deadline)
            }
            // Case 1 (anonymous) and case 3 (recent login required): link to the caller.
            guard !current.disabled else { throw IdentityError.userDisabled }
            if !current.isAnonymous { try requireRecentLogin(session) }
            let user = try await linkVerified(token, provider: provider, to: current, displayName: displayName, store: storage)
            let tokens = try await issueProviderSession(user, provider: provider, subject: token.sub, client: request.client, deadline: deadline)
            return AuthResponse(user: User(user), tokens: tokens)
        }
        if request.linkOnly { throw IdentityError.userNotFound }
        // Case 5: nobody signed in (or the caller's user is gone).
        AuditScope.current?.update { $0.userID = linked?.rawValue ?? "" }
        if let owner = linked {
            guard let user = try await store.user(id: owner) else { throw IdentityError.userNotFound }
            return try await signInLinked(user, provider: provider, subject: token.sub, displayName: displayName, client: request.client, deadline: deadline)
        }
        return try await signUpWithProvider(token, provider: provider, displayName: displayName, client: request.client, store: storage, deadline: deadline)
    }

    /// Removes a provider from the caller (recent login required); never its last way to sign in.
    public func unlinkProvider(_ request: UnlinkProviderRequest) async throws -> User {
        try await audited(
            AuditEvent.Kind.providerUnlinked, failure: AuditEvent.Kind.providerLinkFailed, userID: request.caller.userID,
            client: request.client, sessionID: request.caller.sessionID
        ) {
            AuditScope.current?.update { $0.detailJSON = Self.providerDetail(request.provider) }
            let id = try IdentityInput.validCaller(request.caller)
            try IdentityInput.checkClient(request.client)
            try Self.checkProviderID(request.provider)
            try requireRecentLogin(request.caller)
            let user = try await store.unlink(provider: request.provider, from: id, now: clock.now)
            await publish(IdentityAPI.Topic.userUpdated, user)
            return User(user)
        }
    }

    /// Re-authentication with a fresh provider token of an identity linked to the caller: a new
    /// session (`amr` the provider, fresh `auth_time`) replaces the presented one.
    public func reauthenticateWithProvider(
        _ request: ProviderReauthenticateRequest, deadline: ContinuousClock.Instant? = nil
    ) async throws -> AuthResponse {
        try await audited(
            AuditEvent.Kind.reauthenticate, failure: AuditEvent.Kind.reauthenticateFailed, userID: request.caller.userID,
            client: request.client, sessionID: request.caller.sessionID
        ) {
            AuditScope.current?.update { $0.detailJSON = Self.providerDetail(request.credential.provider) }
            try IdentityInput.checkClient(request.client)
            let current = try await store.callerUser(request.caller)
            let token = try await verifiedToken(request.credential)
            guard try await store.userID(provider: request.credential.provider, subject: token.sub) == current.id else {
                throw IdentityError.userMismatch
            }
            guard !current.disabled else { throw IdentityError.userDisabled }
            let (user, tokens) = try await signInVerified(current, client: request.client, amr: [request.credential.provider], deadline: deadline)
            try await links.confirmLinked(tokens, user: current.id, provider: request.credential.provider, subject: token.sub)
            let replaced = RevokeSessionRequest(sessionID: request.caller.sessionID, reason: "reauthenticated")
            _ = try await self.tokens.call(TokenAPI.revokeSession, replaced)
            return AuthResponse(user: user, tokens: tokens)
        }
    }

    // MARK: The cases

    /// A sign-in of `user`, to whom the identity is linked: disabled users are refused; a name
    /// the app supplies is set only when the user has none (Apple sends it once).
    private func signInLinked(
        _ user: UserRecord, provider: String, subject: String, displayName: String?, client: ClientInfo, deadline: ContinuousClock.Instant?
    ) async throws -> AuthResponse {
        auditUser(user.id)
        guard !user.disabled else { throw IdentityError.userDisabled }
        var current = user
        if let displayName, user.displayName == nil {
            current = try await store.update(id: user.id, expectedVersion: nil, now: clock.now) { stored in
                if stored.displayName == nil { stored.displayName = displayName }
            }
            await publish(IdentityAPI.Topic.userUpdated, current)
        }
        let (signedIn, tokens) = try await signInVerified(current, client: client, amr: [provider], deadline: deadline)
        try await links.confirmLinked(tokens, user: user.id, provider: provider, subject: subject)
        return AuthResponse(user: signedIn, tokens: tokens)
    }

    /// Case 5, an identity linked to nobody: a new user with the token's email (verified as the
    /// provider says) and the app's name for it. `email_exists` when another user has the email.
    private func signUpWithProvider(
        _ token: VerifiedProviderToken, provider: String, displayName: String?, client: ClientInfo, store storage: Store,
        deadline: ContinuousClock.Instant?
    ) async throws -> AuthResponse {
        AuditScope.current?.update { $0.kind = AuditEvent.Kind.signUp }
        let email = try Self.providerEmail(token)
        // A concurrent first sign-in of the same identity may win the insert (its user then has
        // the email too): sign in to that user instead of refusing.
        func signInToWinner() async throws -> AuthResponse? {
            guard let owner = try await store.userID(provider: provider, subject: token.sub), let user = try await store.user(id: owner) else {
                return nil
            }
            AuditScope.current?.update { $0.kind = AuditEvent.Kind.signIn }
            return try await signInLinked(user, provider: provider, subject: token.sub, displayName: nil, client: client, deadline: deadline)
        }
        if let email {
            auditEmail(email)
            if try await store.user(normalizedEmail: email.normalized) != nil {
                if let reply = try await signInToWinner() { return reply }
                throw IdentityError.emailExists
            }
        }
        let at = clock.now
        let record = UserRecord(
            id: .random(), email: email, emailVerified: email != nil, displayName: displayName,
            settingsJSON: defaultSettingsJSON, createdAt: at, lastSignInAt: at)
        auditUser(record.id)
        let user: UserRecord
        do {
            user = try await store.insert(record, identity: provider, subject: token.sub)
        } catch let error as IdentityError where error == .credentialAlreadyInUse || error == .emailExists {
            if let reply = try await signInToWinner() { return reply }
            throw error
        }
        await publish(IdentityAPI.Topic.userCreated, user)
        let tokens = try await issueProviderSession(user, provider: provider, subject: token.sub, client: client, deadline: deadline)
        return AuthResponse(user: User(user), tokens: tokens)
    }

    /// Cases 1 and 3: links the identity to `current`. An anonymous user stops being anonymous
    /// and takes the token's email (`email_exists` if another user has it); a user with an email
    /// keeps it, and a verified provider email equal to it marks it verified.
    private func linkVerified(
        _ token: VerifiedProviderToken, provider: String, to current: UserRecord, displayName: String?, store storage: Store
    ) async throws -> UserRecord {
        let email = current.isAnonymous ? try Self.providerEmail(token) : nil
        if let email, try await store.user(normalizedEmail: email.normalized) != nil { throw IdentityError.emailExists }
        let verifiedEmail = token.emailVerified ? token.email.flatMap { EmailAddress.normalize($0) } : nil
        let now = clock.now
        let user = try await store.link(provider: provider, subject: token.sub, to: current.id, now: now) { user in
            user.lastSignInAt = now.roundedToMilliseconds
            if user.isAnonymous {
                user.isAnonymous = false
                if let email {
                    user.email = email.typed
                    user.emailNormalized = email.normalized
                    user.emailVerified = true
                }
            } else if let verifiedEmail, verifiedEmail == user.emailNormalized {
                user.emailVerified = true
            }
            if let displayName, user.displayName == nil { user.displayName = displayName }
        }
        await publish(IdentityAPI.Topic.userUpdated, user)
        return user
    }

    /// Case 2: the anonymous caller's identity is another user's. Without a decision,
    /// `migration_required` with a handle carrying the verified identity (the provider's sheet
    /// need not be shown again); with one, the migration (the anonymous user deleted only now).
    private func migrateToLinked(
        _ owner: UserID, from anonymous: UserRecord, session: AuthenticatedCaller, provider: String, subject: String,
        request: ProviderSignInRequest, deadline: ContinuousClock.Instant?
    ) async throws -> AuthResponse {
        AuditScope.current?.update { $0.kind = AuditEvent.Kind.signIn }
        guard let target = try await store.user(id: owner) else { throw IdentityError.credentialAlreadyInUse }
        guard !target.disabled else { throw IdentityError.userDisabled }
        let identity = ResumeHandles.ProviderIdentity(provider: provider, subject: subject)
        guard let allowMigration = request.allowMigration else {
            var carried = identity
            carried.appleRefreshToken = AppleTokenCarry.current?.refreshToken
            carried.appleClientID = AppleTokenCarry.current?.clientID
            let handle = try await resumeHandles.issue(
                anonymousUserID: anonymous.id, sessionID: session.sessionID, target: target, providerIdentity: carried, now: clock.now,
                shared: sharedResumeHandles)
            throw IdentityError.migrationRequired(
                anonymousUserID: anonymous.id.rawValue, existingUserID: target.id.rawValue, resumeHandle: handle,
                expiresInSeconds: Int(resumeHandles.ttl.rounded(.up)))
        }
        if let reply = try await migration.migrate(
            anonymous.id, to: target, performMigration: allowMigration, client: request.client, amr: [provider], deadline: deadline)
        {
            try await links.confirmLinked(reply.tokens, user: target.id, provider: provider, subject: subject)
            return reply
        }
        // The caller was upgraded meanwhile: an ordinary sign-in to the identity's user.
        let (user, tokens) = try await signInVerified(target, client: request.client, amr: [provider], deadline: deadline)
        try await links.confirmLinked(tokens, user: target.id, provider: provider, subject: subject)
        return AuthResponse(user: user, tokens: tokens)
    }

    // MARK: Helpers

    /// A session for `user`, just created or linked (`amr` the provider, `auth_time` now),
    /// confirmed against a racing disable or deletion as a password sign-in's is, and against a
    /// racing unlink (`confirmLinked`).
    private func issueProviderSession(
        _ user: UserRecord, provider: String, subject: String, client: ClientInfo, deadline: ContinuousClock.Instant?
    ) async throws -> SessionTokens {
        let tokens = try await issueConfirmedSession(
            for: user, at: clock.now, client: client, verified: user.passwordHash, amr: [provider], deadline: deadline)
        try await links.confirmLinked(tokens, user: user.id, provider: provider, subject: subject)
        return tokens
    }

    /// The verified token, or the refusal as an `IdentityError` (the token never in it).
    func verifiedToken(_ credential: ProviderCredential) async throws -> VerifiedProviderToken {
        try Self.checkProviderID(credential.provider)
        guard !credential.idToken.isEmpty else {
            throw IdentityError.invalidArgument(
                field: "idToken", reason: "a provider sign-in needs the provider's ID token; a provider user id alone is never trusted")
        }
        guard credential.nonce.utf8.count <= 512 else { throw IdentityError.invalidArgument(field: "nonce", reason: "longer than 512 bytes") }
        guard let verifier else { throw IdentityError.unknownProvider(credential.provider) }
        let token: VerifiedProviderToken
        do {
            token = try await verifier.verify(
                idToken: credential.idToken, provider: credential.provider, nonce: credential.nonce.isEmpty ? nil : credential.nonce,
                now: clock.now)
        } catch {
            switch error {
            case .invalidToken(let reason): throw IdentityError.invalidProviderToken(reason: reason.rawValue, message: reason.message)
            case .providerUnavailable(let provider, _): throw IdentityError.providerUnavailable(provider: provider)
            case .unknownProvider(let provider): throw IdentityError.unknownProvider(provider)
            }
        }
        guard token.sub.utf8.count <= 255 else {
            throw IdentityError.invalidProviderToken(reason: "malformed", message: "the ID token's sub is longer than 255 bytes")
        }
        // Several instances: a token accepted by another instance is a replay here too.
        if let shared = sharedReplayGuard,
            try await !shared.acceptProviderToken(token.replayID, until: token.replayUntil, now: clock.now)
        {
            let reason = InvalidProviderTokenReason.replayed
            throw IdentityError.invalidProviderToken(reason: reason.rawValue, message: reason.message)
        }
        return token
    }

    /// The token's email as an address when the provider says it is verified; nil otherwise. An
    /// unverified address is never stored: it would block its owner's sign-up, and a password
    /// reset mailed to it would hand the owner an account the token's holder can still enter.
    /// One that does not parse is ignored (the user is created without it) rather than refused.
    static func providerEmail(_ token: VerifiedProviderToken) throws -> EmailAddress? {
        guard token.emailVerified, let text = token.email, !text.isEmpty else { return nil }
        return try? EmailAddress(text)
    }

    /// A provider id's shape: 1–64 bytes of letters, digits, `.`, `-` and `_`.
    static func checkProviderID(_ provider: String) throws {
        guard !provider.isEmpty, provider.utf8.count <= 64,
            provider.utf8.allSatisfy({ b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x2D || b == 0x5F
            })
        else {
            throw IdentityError.invalidArgument(field: "provider", reason: "not a provider id (apple.com, google.com or oidc.<name>)")
        }
        guard provider != "password" else {
            throw IdentityError.invalidArgument(field: "provider", reason: "password is not a provider: use the password methods")
        }
    }

    /// The audit event's detail naming the provider (an id of the checked shape: no escaping needed).
    static func providerDetail(_ provider: String) -> String {
        let safe = provider.utf8.count <= 64 && provider.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }
        return safe ? #"{"provider":"\#(provider)"}"# : ""
    }
}

/// Apple's refresh token of the sign-in running on this task, until it is kept: a
/// `migration_required` answer puts it in the resume handle.
struct AppleTokenCarry: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Apple's refresh token.
    var refreshToken: String
    /// The client id it was issued to.
    var clientID: String

    init(_ token: (refreshToken: String, clientID: String)) {
        refreshToken = token.refreshToken
        clientID = token.clientID
    }

    /// The token of the sign-in on this task, if any.
    @TaskLocal static var current: AppleTokenCarry?

    /// Never the token.
    var description: String { "AppleTokenCarry(clientID: \(clientID), refreshToken: <redacted>)" }
    var debugDescription: String { description }
    var customMirror: Mirror { Mirror(self, children: ["clientID": clientID, "refreshToken": "<redacted>"]) }
}
