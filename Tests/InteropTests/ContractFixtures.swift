// One populated instance of every GatehouseContracts message, for ContractGoldenTests: every
// field set to a non-default value, recursively (optionals present, arrays and maps non-empty,
// dates with a fractional second), so Tests/Interop/contracts.py can tell that each proto field
// has a Swift counterpart. A field added on either side must be set here too.
import Foundation
import GatehouseContracts

/// A distinct instant for fixture `n`: whole seconds past 2023-11-14 plus `n + 1` milliseconds,
/// so both the seconds and the nanos of its google.protobuf.Timestamp are non-zero.
private func instant(_ n: Int) -> Date {
    Date(timeIntervalSince1970: Double(1_700_000_000 + n * 3_600) + Double(n % 999 + 1) / 1_000)
}

// MARK: common.proto and envelope.proto (gatehouse.v1)

extension ClientInfo {
    /// Every field set.
    static let contractFixture = ClientInfo(userAgent: "curl/8.5 (é)", ip: "2001:db8::1")
}

extension UserClaims {
    /// Every field set; `exists` and `disabled` true (their non-default values).
    static let contractFixture = UserClaims(
        exists: true, disabled: true, email: "claims@example.com", emailVerified: true, isAnonymous: true,
        customClaimsJSON: #"{"role":"admin"}"#, tokensValidAfter: instant(1))
}

extension ClaimsForSessionRequest {
    /// Every field set.
    static let contractFixture = ClaimsForSessionRequest(userID: "user-claims-1")
}

extension IssueSessionRequest {
    /// Every field set, nested messages populated.
    static let contractFixture = IssueSessionRequest(
        userID: "user-issue-2", claims: .contractFixture, amr: ["pwd", "otp"], authTime: instant(2),
        client: .contractFixture)
}

extension SessionTokens {
    /// Every field set.
    static let contractFixture = SessionTokens(
        accessToken: "eyJ.access.3", refreshToken: "refresh-3", tokenType: "Bearer", expiresIn: 900,
        sessionID: "session-3")
}

extension RequestHeader {
    /// Every field set.
    static let contractFixture = RequestHeader(
        version: 1, requestID: 1 << 40, method: "identity.signUp", timeoutMs: 30_000,
        traceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
}

extension ReplyHeader {
    /// Every field set, with an error.
    static let contractFixture = ReplyHeader(requestID: 42, error: .contractFixture)
}

extension RPCError {
    /// Every field set (`gatehouse.v1.Error`), details non-empty.
    static let contractFixture = RPCError(
        "weak_password", "The password is too weak.", details: ["reasons": "too_short,common_password", "min": "8"])
}

// MARK: identity.proto (gatehouse.identity.v1)

extension User {
    /// Every field set, `lastSignInAt` present.
    static let contractFixture = User(
        id: "AAAAAAAAAAAAAAAAAAAAAA", email: "ada@example.com", emailVerified: true, displayName: "Ada",
        photoURL: "https://example.com/ada.png", isAnonymous: true, createdAt: instant(4), lastSignInAt: instant(5),
        settingsJSON: #"{"theme":"dark"}"#, version: 7, disabled: true, providers: ["google.com", "password"])
}

extension AuthenticatedCaller {
    /// Every field set.
    static let contractFixture = AuthenticatedCaller(userID: "AAAAAAAAAAAAAAAAAAAAAA", sessionID: "sess-1", authTime: instant(6))
}

extension ReauthenticateRequest {
    /// Every field set, `email` present.
    static let contractFixture = ReauthenticateRequest(
        caller: .contractFixture, email: "me@example.com", password: "correct horse battery", client: .contractFixture)
}

extension ChangePasswordRequest {
    /// Every field set.
    static let contractFixture = ChangePasswordRequest(caller: .contractFixture, password: "new correct horse", client: .contractFixture)
}

extension ChangeEmailRequest {
    /// Every field set.
    static let contractFixture = ChangeEmailRequest(
        caller: .contractFixture, email: "changed@example.com", locale: "ja-JP,ja,en", client: .contractFixture)
}

extension CredentialChangeResponse {
    /// Every field set.
    static let contractFixture = CredentialChangeResponse(
        user: .contractFixture, revokedSessionIDs: ["sess-2", "sess-3"], pendingEmail: "pending@example.com", pendingExpiresIn: 3600)
}

extension DeleteAccountRequest {
    /// Every field set, continuing anonymously.
    static let contractFixture = DeleteAccountRequest(caller: .contractFixture, continueAnonymously: true, client: .contractFixture)
}

extension DeleteAccountResponse {
    /// Every field set, the anonymous continuation present.
    static let contractFixture = DeleteAccountResponse(revokedSessionIDs: ["sess-4", "sess-5"], anonymous: .contractFixture)
}

extension SignUpRequest {
    /// Every field set, `displayName` present.
    static let contractFixture = SignUpRequest(
        email: "new@example.com", password: "correct horse battery", displayName: "New", client: .contractFixture, locale: "ja,en")
}

extension SignInAnonymouslyRequest {
    /// Every field set.
    static let contractFixture = SignInAnonymouslyRequest(client: .contractFixture)
}

extension SignInRequest {
    /// Every field set.
    static let contractFixture = SignInRequest(
        email: "ada@example.com", password: "correct horse battery", client: .contractFixture, caller: .contractFixture,
        allowMigration: true)
}

extension AuthResponse {
    /// Every field set, nested messages populated.
    static let contractFixture = AuthResponse(
        user: .contractFixture, tokens: .contractFixture, migration: .contractFixture, verificationRequired: true)
}

extension MigrationOutcome {
    /// Every field set.
    static let contractFixture = MigrationOutcome(
        oldUserID: "AAAAAAAAAAAAAAAAAAAAAA", newUserID: "BBBBBBBBBBBBBBBBBBBBBB", performMigration: true,
        revokedSessionIDs: ["sess-1", "sess-2"])
}

extension UpgradeAnonymousRequest {
    /// Every field set.
    static let contractFixture = UpgradeAnonymousRequest(
        caller: .contractFixture, email: "ada@example.com", password: "correct horse battery", displayName: "Ada",
        client: .contractFixture, locale: "ja,en")
}

extension ResumeSignInRequest {
    /// Every field set.
    static let contractFixture = ResumeSignInRequest(
        caller: .contractFixture, resumeHandle: "aGFuZGxl", allowMigration: true, client: .contractFixture)
}

extension ProviderCredential {
    /// Every field set.
    static let contractFixture = ProviderCredential(provider: "apple.com", idToken: "eyJ.eyJ.sig", nonce: "raw-nonce")
}

extension ProviderSignInRequest {
    /// Every field set.
    static let contractFixture = ProviderSignInRequest(
        credential: .contractFixture, caller: .contractFixture, displayName: "Ada Lovelace", allowMigration: true,
        client: .contractFixture, linkOnly: true, authorizationCode: "c0de", redirectURI: "https://app.example.com/callback")
}

extension AppleNotificationRequest {
    /// Every field set.
    static let contractFixture = AppleNotificationRequest(body: Data(#"{"payload":"a.b.c"}"#.utf8))
}

extension AppleNotificationResponse {
    /// Every field set.
    static let contractFixture = AppleNotificationResponse(type: "consent-revoked", userID: "user-7", revokedSessionIDs: ["sess-9"])
}

extension UnlinkProviderRequest {
    /// Every field set.
    static let contractFixture = UnlinkProviderRequest(caller: .contractFixture, provider: "google.com", client: .contractFixture)
}

extension ProviderReauthenticateRequest {
    /// Every field set.
    static let contractFixture = ProviderReauthenticateRequest(caller: .contractFixture, credential: .contractFixture, client: .contractFixture)
}

extension UserIDRequest {
    /// Every field set (`gatehouse.identity.v1.UserIdRequest`).
    static let contractFixture = UserIDRequest(userID: "user-6")
}

extension UpdateProfileRequest {
    /// Every optional present.
    static let contractFixture = UpdateProfileRequest(
        userID: "user-7", displayName: "Ada L.", photoURL: "https://example.com/a.png",
        settingsJSON: #"{"lang":"fr"}"#, expectedVersion: 3, settingsPatchJSON: #"{"theme":null}"#)
}

extension SetDisabledRequest {
    /// Every field set.
    static let contractFixture = SetDisabledRequest(userID: "user-8", disabled: true)
}

extension SetCustomClaimsRequest {
    /// Every field set.
    static let contractFixture = SetCustomClaimsRequest(userID: "user-8", claimsJSON: #"{"role":"admin"}"#)
}

extension PasswordStrengthRequest {
    /// Every field set, context included.
    static let contractFixture = PasswordStrengthRequest(
        password: "hunter2", email: "ada@example.com", displayName: "Ada")
}

extension StrengthReason {
    /// Every field set.
    static let contractFixture = StrengthReason(code: "common_password", message: "This password is very common.")
}

extension PasswordStrengthResponse {
    /// Every field set, lists non-empty.
    static let contractFixture = PasswordStrengthResponse(
        score: 1, reasons: [.contractFixture, StrengthReason(code: "short", message: "Add more characters.")],
        acceptable: true, violations: ["too_short", "common_password"], level: "weak")
}

extension IdentityStats {
    /// Every field set.
    static let contractFixture: IdentityStats = {
        var stats = IdentityStats(
            hashWorkers: 2, hashBusyWorkers: 1, hashQueueDepth: 3, hashQueueLimit: 64, hashCompleted: 1_000_000,
            hashRejected: 5)
        stats.mailQueued = 7
        stats.mailSent = 8_000_000_000
        stats.mailRetried = 9
        stats.mailDead = 10
        stats.mailDeliveryLatencyMsSum = 11_000_000_000
        stats.mailDeliverySecondsBuckets = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12_000_000_000]
        return stats
    }()
}

extension UserEvent {
    /// Every field set.
    static let contractFixture = UserEvent(userID: "user-9", version: 4, occurredAt: instant(9))
}

// MARK: token.proto (gatehouse.token.v1)

extension RefreshRequest {
    /// Every field set.
    static let contractFixture = RefreshRequest(refreshToken: "refresh-10", client: .contractFixture)
}

extension RevokeSessionRequest {
    /// Every field set.
    static let contractFixture = RevokeSessionRequest(sessionID: "session-11", reason: "admin")
}

extension UserSessionsRequest {
    /// Every field set.
    static let contractFixture = UserSessionsRequest(userID: "user-12", reason: "password_changed", exceptSessionID: "session-12")
}

extension RevokedCount {
    /// Every field set.
    static let contractFixture = RevokedCount(count: 2, sessionIDs: ["session-3a", "session-3b"])
}

extension SessionInfo {
    /// Every field set, `revokedAt` present.
    static let contractFixture = SessionInfo(
        sessionID: "session-13", userID: "user-13", createdAt: instant(13), authTime: instant(14),
        lastUsedAt: instant(15), expiresAt: instant(16), amr: ["pwd"], client: .contractFixture,
        revokedAt: instant(17), revokeReason: "sign_out")
}

extension SessionList {
    /// Two populated sessions.
    static let contractFixture = SessionList(sessions: [
        .contractFixture,
        SessionInfo(
            sessionID: "session-18", userID: "user-18", createdAt: instant(18), authTime: instant(19),
            lastUsedAt: instant(20), expiresAt: instant(21), amr: ["pwd", "mfa"],
            client: ClientInfo(userAgent: "Safari", ip: "192.0.2.7"), revokedAt: instant(22), revokeReason: "admin"),
    ])
}

extension VerifyRequest {
    /// Every field set.
    static let contractFixture = VerifyRequest(token: "eyJ.verify.23", checkRevoked: true)
}

extension VerifiedClaims {
    /// Every field set.
    static let contractFixture = VerifiedClaims(
        subject: "user-24", sessionID: "session-24", issuedAt: instant(24), expiresAt: instant(25),
        authTime: instant(26), amr: ["pwd"], email: "ada@example.com", emailVerified: true, isAnonymous: true,
        tokenID: "jti-24", customClaimsJSON: #"{"tier":"gold"}"#)
}

extension JWKSDocument {
    /// Every field set.
    static let contractFixture = JWKSDocument(json: #"{"keys":[]}"#)
}

extension RotateKeysRequest {
    /// Every field set.
    static let contractFixture = RotateKeysRequest(actor: "admin_key:AAAAAAAAAAAAAAAA")
}

extension RotateKeysResponse {
    /// Every field set, `previousRetiresAt` present.
    static let contractFixture = RotateKeysResponse(
        kid: "key-27", previousKid: "key-26", previousRetiresAt: instant(27), activatesAt: instant(127), publishedKids: ["key-26", "key-27"])
}

extension SessionRevokedEvent {
    /// Every field set.
    static let contractFixture = SessionRevokedEvent(
        sessionID: "session-28", userID: "user-28", reason: "refresh_token_reused", revokedAt: instant(28),
        epoch: "epoch-28", seq: 28)
}

extension RevocationHeartbeat {
    /// Every field set.
    static let contractFixture = RevocationHeartbeat(epoch: "epoch-29", seq: 29)
}

extension RevokedSession {
    /// Every field set.
    static let contractFixture = RevokedSession(sessionID: "session-30", revokedAt: instant(30))
}

extension RevocationSnapshot {
    /// Every field set, two sessions.
    static let contractFixture = RevocationSnapshot(
        epoch: "epoch-31", seq: 31, sessions: [.contractFixture, RevokedSession(sessionID: "session-32", revokedAt: instant(32))])
}

// MARK: token.lastActivity (TokenAPI+Activity.swift)

extension LastActivityRequest {
    /// Every field set, two users.
    static let contractFixture = LastActivityRequest(userIDs: ["user-activity-33", "user-activity-34"])
}

extension UserActivity {
    /// Every field set.
    static let contractFixture = UserActivity(userID: "user-activity-35", lastUsedAt: instant(35))
}

extension LastActivityResponse {
    /// Every field set, two entries.
    static let contractFixture = LastActivityResponse(
        entries: [.contractFixture, UserActivity(userID: "user-activity-36", lastUsedAt: instant(36))])
}

extension PasswordResetRequest {
    /// Every field set, in Japanese.
    static let contractFixture = PasswordResetRequest(email: "reset@example.com", locale: "ja", client: .contractFixture)
}

extension ConfirmPasswordResetRequest {
    /// Every field set.
    static let contractFixture = ConfirmPasswordResetRequest(
        code: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", password: "a new long passphrase", client: .contractFixture)
}

extension ConfirmPasswordResetResponse {
    /// Every field set.
    static let contractFixture = ConfirmPasswordResetResponse(revokedSessionIDs: ["sess-6", "sess-7"])
}

// MARK: Email verification and change (IdentityAPI+EmailVerification.swift)

extension SendEmailVerificationRequest {
    /// Every field set.
    static let contractFixture = SendEmailVerificationRequest(caller: .contractFixture, locale: "ja", client: .contractFixture)
}

extension SendEmailVerificationResponse {
    /// Every field set.
    static let contractFixture = SendEmailVerificationResponse(email: "verify@example.com", expiresIn: 86_400)
}

extension EmailVerificationRequest {
    /// Every field set.
    static let contractFixture = EmailVerificationRequest(email: "verify@example.com", locale: "en", client: .contractFixture)
}

extension EmailCodeRequest {
    /// Every field set.
    static let contractFixture = EmailCodeRequest(code: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", locale: "ja", client: .contractFixture)
}

extension EmailCodeResponse {
    /// Every field set.
    static let contractFixture = EmailCodeResponse(user: .contractFixture, revokedSessionIDs: ["sess-8"])
}

// MARK: import and export (identity.importUsers, identity.exportUsers)

extension ImportedUser {
    /// Every field set, optionals present.
    static let contractFixture = ImportedUser(
        id: "imported-user-0000000001", email: "imported@example.com", emailVerified: true, displayName: "Imported Ada",
        photoURL: "https://example.com/i.png", passwordHash: "$2b$10$abcdefghijklmnopqrstuu0123456789012345678901234567890",
        providers: ["google.com", "apple.com"], customClaimsJSON: #"{"tier":2}"#, disabled: true,
        createdAt: Date(timeIntervalSince1970: 1_600_000_000.123), identities: [.contractFixture, .contractFixture])
}

extension ImportedIdentity {
    /// Every field set.
    static let contractFixture = ImportedIdentity(provider: "google.com", subject: "108234567890123456789")
}

extension ImportUsersRequest {
    /// Every field set.
    static let contractFixture = ImportUsersRequest(users: [.contractFixture, .contractFixture], mode: "update", actor: "admin_key:k1")
}

extension ImportResult {
    /// Every field set.
    static let contractFixture = ImportResult(
        index: 7, outcome: "failed", userID: "imported-user-0000000001", errorCode: "invalid_argument", errorMessage: "an unknown hash format")
}

extension ImportUsersResponse {
    /// Every field set.
    static let contractFixture = ImportUsersResponse(results: [.contractFixture])
}

extension ExportUsersRequest {
    /// Every field set.
    static let contractFixture = ExportUsersRequest(afterID: "imported-user-0000000000", pageSize: 500, includeHashes: true)
}

extension ExportUsersResponse {
    /// Every field set.
    static let contractFixture = ExportUsersResponse(users: [.contractFixture], nextAfterID: "imported-user-0000000001")
}

// MARK: change log (user.changed, identity.heartbeat, identity.listChanges, identity.userChanges)

extension UserChange {
    /// Every field set.
    static let contractFixture = UserChange(
        seq: 912, userID: "user-9", kinds: ["profile", "settings"], occurredAt: instant(21), user: .contractFixture)
}

extension ChangeFeedHeartbeat {
    /// Every field set.
    static let contractFixture = ChangeFeedHeartbeat(seq: 4242)
}

extension ListChangesRequest {
    /// Every field set.
    static let contractFixture = ListChangesRequest(afterSeq: 77, limit: 500)
}

extension ListChangesResponse {
    /// Every field set.
    static let contractFixture = ListChangesResponse(changes: [.contractFixture], head: 913, truncated: true, resyncUserIDs: ["user-9", "user-10"])
}

extension UserChangesRequest {
    /// Every field set.
    static let contractFixture = UserChangesRequest(userID: "user-9", resume: true, afterSeq: 55, limit: 100)
}

extension UserChangesResponse {
    /// Every field set.
    static let contractFixture = UserChangesResponse(user: .contractFixture, head: 913, changes: [.contractFixture], resync: true)
}

// MARK: the audit log (identity.listAudit, token.listAudit)

extension AuditEvent {
    /// Every field set.
    static let contractFixture = AuditEvent(
        seq: 42, occurredAt: instant(40), kind: AuditEvent.Kind.signInFailed, userID: "user-audit-1", actor: AuditEvent.Actor.user,
        reason: "invalid_credentials", email: "audit@example.com", ip: "192.0.2.7", userAgent: "curl/8.5", sessionID: "session-audit-1",
        detailJSON: #"{"created":3}"#)
}

extension ListAuditRequest {
    /// Every field set.
    static let contractFixture = ListAuditRequest(afterSeq: 41, userID: "user-audit-1", limit: 100, since: instant(41))
}

extension ListAuditResponse {
    /// Every field set.
    static let contractFixture = ListAuditResponse(events: [.contractFixture], nextAfterSeq: 42)
}

// MARK: the admin API (identity.createAdminKey … generateActionLink)

extension AdminKey {
    /// Every field set.
    static let contractFixture = AdminKey(
        id: "AbCdEfGhIjKlMnOp", name: "ops key", scopes: [AdminKey.Scope.usersRead, AdminKey.Scope.audit], createdAt: instant(50),
        revokedAt: instant(51), lastUsedAt: instant(52))
}

extension CreateAdminKeyRequest {
    /// Every field set.
    static let contractFixture = CreateAdminKeyRequest(name: "ops key", scopes: [AdminKey.Scope.usersWrite])
}

extension CreateAdminKeyResponse {
    /// Every field set.
    static let contractFixture = CreateAdminKeyResponse(key: .contractFixture, token: "gha_AbCdEfGhIjKlMnOp.secret")
}

extension AdminKeyList {
    /// Every field set.
    static let contractFixture = AdminKeyList(keys: [.contractFixture])
}

extension AdminKeyIDRequest {
    /// Every field set.
    static let contractFixture = AdminKeyIDRequest(id: "AbCdEfGhIjKlMnOp")
}

extension AuthenticateAdminKeyRequest {
    /// Every field set.
    static let contractFixture = AuthenticateAdminKeyRequest(token: "gha_AbCdEfGhIjKlMnOp.secret")
}

extension AdminUser {
    /// Every field set.
    static let contractFixture = AdminUser(user: .contractFixture, customClaimsJSON: #"{"role":"admin"}"#, updatedAt: instant(53))
}

extension ListUsersRequest {
    /// Every field set (the optional booleans at their non-default value).
    static let contractFixture = ListUsersRequest(
        emailPrefix: "ana", provider: "google.com", disabled: true, anonymous: true, createdAfter: instant(54), createdBefore: instant(55),
        limit: 50, cursor: "user-cursor-1")
}

extension ListUsersResponse {
    /// Every field set.
    static let contractFixture = ListUsersResponse(users: [.contractFixture], nextCursor: "user-cursor-2")
}

extension AdminUserRequest {
    /// Every field set.
    static let contractFixture = AdminUserRequest(userID: "user-admin-1", actor: "admin_key:AbCdEfGhIjKlMnOp", client: .contractFixture)
}

extension AdminCreateUserRequest {
    /// Every field set.
    static let contractFixture = AdminCreateUserRequest(
        email: "new@example.com", password: "correct horse battery", emailVerified: true, displayName: "New", disabled: true,
        actor: "admin_key:AbCdEfGhIjKlMnOp", client: .contractFixture)
}

extension AdminUpdateUserRequest {
    /// Every field set.
    static let contractFixture = AdminUpdateUserRequest(
        userID: "user-admin-1", email: "other@example.com", displayName: "Other", disabled: true, emailVerified: true,
        password: "another horse battery", actor: "admin_key:AbCdEfGhIjKlMnOp", client: .contractFixture)
}

extension AdminSetClaimsRequest {
    /// Every field set.
    static let contractFixture = AdminSetClaimsRequest(
        userID: "user-admin-1", claimsJSON: #"{"tier":2}"#, actor: "admin_key:AbCdEfGhIjKlMnOp", client: .contractFixture)
}

extension GenerateActionLinkRequest {
    /// Every field set.
    static let contractFixture = GenerateActionLinkRequest(
        userID: "user-admin-1", kind: "password_reset", actor: "admin_key:AbCdEfGhIjKlMnOp", client: .contractFixture)
}

extension ActionLink {
    /// Every field set.
    static let contractFixture = ActionLink(link: "https://auth.example.com/actions?mode=resetPassword&code=c", code: "c", expiresIn: 3600)
}
