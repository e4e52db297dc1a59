import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an app links to talk to a Gatehouse server: every user-facing operation as an async
/// call, the session kept in a `TokenStore` and refreshed when needed, the state of the session
/// as a stream (`authState`) and the user's changes live (`userUpdates()`).
///
/// One client per server per app; it is safe to use from any task. A new client over the same
/// store restores the session saved by the last one (a relaunch).
///
/// ```swift
/// let gatehouse = GatehouseClient(baseURL: URL(string: "https://auth.example.com")!, tokenStore: KeychainTokenStore())
/// let result = try await gatehouse.signIn(email: email, password: password)
/// for await state in gatehouse.authState { … }
/// ```
public final class GatehouseClient: Sendable {
    /// The gateway's base URL.
    public let baseURL: URL
    let transport: Transport
    let keeper: SessionKeeper
    let configuration: Configuration

    /// Settings of a client beyond its server and store.
    public struct Configuration: Sendable {
        /// An access token closer than this to its expiry is refreshed before use (seconds).
        public var refreshLeeway: TimeInterval
        /// How long one HTTP call may take (seconds).
        public var requestTimeout: TimeInterval
        /// The first wait before an event stream reconnects after a failure (seconds); it
        /// doubles up to `maximumReconnectDelay`, and the server's `retry:` is a floor.
        public var reconnectDelay: TimeInterval
        /// The longest wait before an event stream reconnects (seconds).
        public var maximumReconnectDelay: TimeInterval
        /// The clock the client reads token expiries against (tests move it).
        public var now: @Sendable () -> Date

        /// The defaults: refresh 60 s before expiry, 30 s per call, reconnect after 1 s up to 30 s.
        public init(
            refreshLeeway: TimeInterval = 60, requestTimeout: TimeInterval = 30, reconnectDelay: TimeInterval = 1,
            maximumReconnectDelay: TimeInterval = 30, now: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.refreshLeeway = refreshLeeway
            self.requestTimeout = requestTimeout
            self.reconnectDelay = reconnectDelay
            self.maximumReconnectDelay = maximumReconnectDelay
            self.now = now
        }
    }

    /// A client of the server at `baseURL`, keeping its session in `tokenStore` (the session
    /// saved there is restored now). A store that cannot be read starts signed out.
    public init(
        baseURL: URL, tokenStore: any TokenStore = InMemoryTokenStore(), urlSession: URLSession = .shared,
        configuration: Configuration = Configuration()
    ) {
        self.baseURL = baseURL
        self.configuration = configuration
        transport = Transport(baseURL: baseURL, session: urlSession, timeout: configuration.requestTimeout)
        let restored = (try? tokenStore.load()) ?? nil
        keeper = SessionKeeper(
            store: tokenStore, transport: transport, now: configuration.now, refreshLeeway: configuration.refreshLeeway, restored: restored)
    }

    // MARK: State

    /// The state of the session: signed out, anonymous or signed in, starting with the state
    /// now (on launch, the one restored from the store) and then each change. Each access
    /// makes a new stream; it ends when its consumer stops.
    public var authState: AsyncStream<AuthState> {
        AsyncStream { continuation in
            let relay = Task {
                for await state in await keeper.stateStream() { continuation.yield(state) }
                continuation.finish()
            }
            continuation.onTermination = { _ in relay.cancel() }
        }
    }

    /// The state now.
    public var currentState: AuthState {
        get async { await keeper.state }
    }

    /// The signed-in user as last seen, nil when signed out.
    public var currentUser: User? {
        get async { await keeper.state.user }
    }

    /// How many refreshes this client has sent since it was made.
    public var refreshCount: Int {
        get async { await keeper.refreshCount }
    }

    /// A valid access token for the signed-in user's calls to your own back end: the current
    /// one, or a new one when it is close to expiry. Concurrent callers share one refresh, and
    /// the rotated refresh token is saved before the new access token is returned.
    /// Throws `notSignedIn`; `sessionEnded` or `userDisabled` (the device is signed out now);
    /// `network`, `unavailable` or `rateLimited` (try again later; the session stays); or the
    /// token store's own error when the rotated session cannot be saved.
    public func accessToken() async throws -> String {
        try await keeper.accessToken()
    }

    // MARK: Accounts and sessions

    /// Creates an account with an email and password and signs in to it (`POST /v1/accounts`).
    /// Under a server that requires a verified address first, the result is
    /// `verificationRequired` and there is no session yet.
    @discardableResult
    public func signUp(email: String, password: String, displayName: String? = nil) async throws -> SignUpResult {
        var body: [String: Any] = ["email": email, "password": password]
        if let displayName { body["displayName"] = displayName }
        let answer = try await call("POST", "/v1/accounts", body: body, expect: [201])
        let reply = try Transport.decode(UserAndSessionBody.self, answer)
        guard let session = reply.session else { return .verificationRequired(reply.user) }
        _ = try await keeper.adopt(session, user: reply.user)
        return .signedIn(reply.user)
    }

    /// Creates an anonymous user and signs in as it (`POST /v1/accounts/anonymous`).
    @discardableResult
    public func signInAnonymously() async throws -> User {
        try await adopting(call("POST", "/v1/accounts/anonymous", expect: [201])).user
    }

    /// Signs in with an email and password (`POST /v1/sessions`). When this device holds an
    /// anonymous user and the account exists, `allowMigration` nil throws
    /// `migrationRequired(context)` (ask the user, then `resume`); true or false signs in at once
    /// and deletes the anonymous user (reported in `migration`).
    @discardableResult
    public func signIn(email: String, password: String, allowMigration: Bool? = nil) async throws -> SignInResult {
        var body: [String: Any] = ["email": email, "password": password]
        if let allowMigration { body["allowMigration"] = allowMigration }
        return try await signingIn("/v1/sessions", body: body)
    }

    /// Finishes a sign-in that threw `migrationRequired`, with the user's choice
    /// (`POST /v1/sessions/resume`): the anonymous user is deleted and the existing one signed in.
    @discardableResult
    public func resume(_ context: MigrationContext, allowMigration: Bool) async throws -> SignInResult {
        let body: [String: Any] = ["resumeHandle": context.resumeHandle, "allowMigration": allowMigration]
        return try await adopting(authenticated("POST", "/v1/sessions/resume", body: body, expect: [200]))
    }

    /// Signs in with Apple, Google or an OpenID Connect provider (`POST /v1/sessions/provider`):
    /// to the user the identity belongs to, a new user, or (from an anonymous user) linking it to
    /// this user; `allowMigration` as for `signIn(email:password:allowMigration:)`.
    @discardableResult
    public func signIn(with credential: ProviderCredential, allowMigration: Bool? = nil) async throws -> SignInResult {
        var body = Self.body(of: credential)
        if let allowMigration { body["allowMigration"] = allowMigration }
        return try await signingIn("/v1/sessions/provider", body: body)
    }

    /// Gives the anonymous user of this device an email and password, keeping its id
    /// (`POST /v1/me/upgrade`).
    @discardableResult
    public func upgrade(email: String, password: String, displayName: String? = nil) async throws -> User {
        var body: [String: Any] = ["email": email, "password": password]
        if let displayName { body["displayName"] = displayName }
        return try await adopting(authenticated("POST", "/v1/me/upgrade", body: body, expect: [200])).user
    }

    /// Links a provider identity to the signed-in user (`POST /v1/me/providers`); a recent
    /// login is required unless the user is anonymous.
    @discardableResult
    public func link(_ credential: ProviderCredential) async throws -> User {
        try await adopting(authenticated("POST", "/v1/me/providers", body: Self.body(of: credential), expect: [200])).user
    }

    /// Removes a linked provider (`apple.com`, `google.com`, `oidc.<name>`) from the signed-in
    /// user (`DELETE /v1/me/providers/{provider}`; a recent login is required);
    /// `lastSignInMethod` when it is the user's only way to sign in. The password is not a
    /// provider here (the server answers `invalid_argument`).
    @discardableResult
    public func unlink(provider: String) async throws -> User {
        let answer = try await authenticated("DELETE", "/v1/me/providers/\(Self.pathComponent(provider))", expect: [200])
        let user = try Transport.decode(UserOnlyBody.self, answer).user
        await keeper.update(user: user)
        return user
    }

    /// Proves the password again (`POST /v1/me/reauthenticate`), for changes that need a
    /// recent login: the session is replaced by a fresh one.
    public func reauthenticate(password: String, email: String? = nil) async throws {
        var body: [String: Any] = ["password": password]
        if let email { body["email"] = email }
        _ = try await adopting(authenticated("POST", "/v1/me/reauthenticate", body: body, expect: [200]))
    }

    /// Proves a linked provider again (`POST /v1/me/reauthenticate` with its ID token).
    public func reauthenticate(with credential: ProviderCredential) async throws {
        var body: [String: Any] = ["provider": credential.provider, "idToken": credential.idToken]
        if let nonce = credential.rawNonce { body["nonce"] = nonce }
        _ = try await adopting(authenticated("POST", "/v1/me/reauthenticate", body: body, expect: [200]))
    }

    /// Sets a new password (`PUT /v1/me/password`; a recent login is required). A user without
    /// a password gets one, so it can sign in with its email.
    @discardableResult
    public func changePassword(to newPassword: String) async throws -> User {
        try await updatingUser(authenticated("PUT", "/v1/me/password", body: ["password": newPassword], expect: [200]))
    }

    /// Changes the email address (`PUT /v1/me/email`; a recent login is required): a code is
    /// mailed to the new address and the change happens when it is confirmed (`.pending`, then
    /// `confirmEmailChange(code:)`); `.changed` when nothing needed confirming (the same address,
    /// or only its letter case).
    public func changeEmail(to newEmail: String) async throws -> EmailChangeResult {
        let answer = try await authenticated("PUT", "/v1/me/email", body: ["email": newEmail], expect: [200, 202])
        if answer.status == 202 { return .pending(try Transport.decode(PendingEmailChange.self, answer)) }
        return .changed(try await updatingUser(answer))
    }

    /// Confirms an email change with the code from the mail (`POST /v1/email-change/confirm`).
    public func confirmEmailChange(code: String) async throws {
        _ = try await call("POST", "/v1/email-change/confirm", body: ["code": code], expect: [204])
        await refreshUserQuietly()
    }

    /// Undoes an email change with the code mailed to the old address (`POST /v1/email-change/revert`).
    public func revertEmailChange(code: String) async throws {
        _ = try await call("POST", "/v1/email-change/revert", body: ["code": code], expect: [204])
        await refreshUserQuietly()
    }

    /// Changes the display name, photo URL or settings (`PATCH /v1/me`).
    @discardableResult
    public func updateProfile(_ update: ProfileUpdate) async throws -> User {
        var body: [String: Any] = [:]
        if let displayName = update.displayName { body["displayName"] = displayName }
        if let photoURL = update.photoURL { body["photoURL"] = photoURL }
        if let settings = update.settings {
            body["settings"] = try JSONSerialization.jsonObject(with: GatehouseJSON.encoder.encode(settings), options: [.fragmentsAllowed])
        }
        return try await updatingUser(authenticated("PATCH", "/v1/me", body: body, expect: [200]))
    }

    /// The signed-in user as the server has it now (`GET /v1/me`).
    @discardableResult
    public func reloadUser() async throws -> User {
        try await updatingUser(authenticated("GET", "/v1/me", expect: [200]))
    }

    /// A password's strength, for a meter as the user types (`POST /v1/password-strength`).
    public func passwordStrength(_ password: String) async throws -> PasswordStrength {
        try Transport.decode(PasswordStrength.self, try await call("POST", "/v1/password-strength", body: ["password": password], expect: [200]))
    }

    /// Mails a password reset code to `email` (`POST /v1/password-reset`). It succeeds whether
    /// or not an account has the address.
    public func requestPasswordReset(email: String) async throws {
        _ = try await call("POST", "/v1/password-reset", body: ["email": email], expect: [202])
    }

    /// Sets a new password with the code from the reset mail (`POST /v1/password-reset/confirm`).
    /// Every session of the user ends; sign in with the new password.
    public func confirmPasswordReset(code: String, newPassword: String) async throws {
        _ = try await call("POST", "/v1/password-reset/confirm", body: ["code": code, "password": newPassword], expect: [204])
    }

    /// Mails a verification code to the signed-in user's address (`POST /v1/me/email-verification`).
    @discardableResult
    public func sendEmailVerification() async throws -> EmailVerificationSent {
        try Transport.decode(EmailVerificationSent.self, try await authenticated("POST", "/v1/me/email-verification", expect: [202]))
    }

    /// Mails a verification code to `email` without a session (`POST /v1/email-verification`),
    /// for a sign-up under a server that requires a verified address.
    public func requestEmailVerification(email: String) async throws {
        _ = try await call("POST", "/v1/email-verification", body: ["email": email], expect: [202])
    }

    /// Verifies the address with the code from the mail (`POST /v1/email-verification/confirm`).
    public func confirmEmailVerification(code: String) async throws {
        _ = try await call("POST", "/v1/email-verification/confirm", body: ["code": code], expect: [204])
        await refreshUserQuietly()
    }

    /// Deletes the signed-in user's account (`DELETE /v1/me`; a recent login is required unless
    /// anonymous). With `continueAnonymously`, a new anonymous user is signed in and returned;
    /// otherwise the device is signed out and nil is returned.
    @discardableResult
    public func deleteAccount(continueAnonymously: Bool = false) async throws -> User? {
        let query = continueAnonymously ? [URLQueryItem(name: "continueAnonymously", value: "true")] : []
        let answer = try await authenticated("DELETE", "/v1/me", query: query, expect: [201, 204])
        if answer.status == 201 { return try await adopting(answer).user }
        await keeper.end()
        return nil
    }

    /// Signs out of this device (`DELETE /v1/sessions/current`). The device forgets the
    /// session even when the server cannot be reached; the server is told if it can be.
    public func signOut() async {
        guard let session = await keeper.take() else { return }
        // The server ends the session of the access token it is shown: an expired one is first
        // exchanged (the answer's tokens are used for this call only).
        var token = session.accessToken
        if session.expiresAt.timeIntervalSince(configuration.now()) < 5,
            let request = try? transport.request("POST", "/v1/sessions/refresh", body: ["refreshToken": session.refreshToken]),
            let answer = try? await transport.send(request), answer.status == 200,
            let fresh = try? Transport.decode(SessionOnlyBody.self, answer).session
        {
            token = fresh.accessToken
        }
        if let request = try? transport.request("DELETE", "/v1/sessions/current", bearer: token) {
            _ = try? await transport.send(request)
        }
    }

    /// Ends every session of the user on every device (`DELETE /v1/sessions`), then this one.
    public func signOutEverywhere() async throws {
        _ = try await authenticated("DELETE", "/v1/sessions", expect: [204])
        await keeper.end()
    }
}
