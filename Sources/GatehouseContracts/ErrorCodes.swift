/// Every stable error code of the protocol (`gatehouse.v1.Error.code`), in one table. The
/// gateway maps each to an HTTP status and problem type (`Gateway/ErrorTable.swift`).
extension ErrorCode {
    // Transport-level codes shared by every service.
    /// Something failed that the caller cannot fix; details are in the server's log.
    public static let `internal`: ErrorCode = "internal"
    /// The method name is not served by this server.
    public static let unimplemented: ErrorCode = "unimplemented"
    /// The request's protocol version is not supported.
    public static let unsupportedVersion: ErrorCode = "unsupported_version"
    /// The call did not finish before its deadline.
    public static let deadlineExceeded: ErrorCode = "deadline_exceeded"
    /// The call was cancelled by the caller.
    public static let cancelled: ErrorCode = "cancelled"
    /// The service could not be reached or is shutting down.
    public static let unavailable: ErrorCode = "unavailable"
    /// The service is at capacity; retry later.
    public static let overloaded: ErrorCode = "overloaded"
    /// The request or its body did not decode.
    public static let malformedRequest: ErrorCode = "malformed_request"
    /// A field's value is not acceptable.
    public static let invalidArgument: ErrorCode = "invalid_argument"
    /// The caller sent too many requests; retry after a while.
    public static let rateLimited: ErrorCode = "rate_limited"
    /// The caller's service key may not call this method (service links are authorised per
    /// role: see `RPCMethod.callers`).
    public static let permissionDenied: ErrorCode = "permission_denied"

    // Identity service (proto/identity.proto).
    /// The email address is not syntactically acceptable.
    public static let invalidEmail: ErrorCode = "invalid_email"
    /// The password breaks the policy; `details["reasons"]` lists why (comma-separated codes).
    public static let weakPassword: ErrorCode = "weak_password"
    /// Another user already has this email address (compared case-insensitively).
    public static let emailExists: ErrorCode = "email_exists"
    /// The email and password do not match a user. Says nothing about which one is wrong.
    public static let invalidCredentials: ErrorCode = "invalid_credentials"
    /// The user exists but is disabled.
    public static let userDisabled: ErrorCode = "user_disabled"
    /// No user has this id.
    public static let userNotFound: ErrorCode = "user_not_found"
    /// `expectedVersion` does not match the stored version; `details["currentVersion"]` has it.
    public static let versionConflict: ErrorCode = "version_conflict"
    /// Too many failed password checks for this account (counted per email, whether or not it
    /// exists); `details["retryAfter"]` has the seconds until the next attempt is accepted.
    public static let tooManyAttempts: ErrorCode = "too_many_attempts"
    /// An anonymous caller signed in to an existing account without saying whether to migrate:
    /// `details` carry `anonymousUserId`, `existingUserId`, `resumeHandle` and
    /// `resumeHandleExpiresIn` (seconds), so the app asks the user and resumes without the
    /// credentials.
    public static let migrationRequired: ErrorCode = "migration_required"
    /// The operation needs a sign-in (or re-authentication) more recent than the configured window.
    public static let requiresRecentLogin: ErrorCode = "requires_recent_login"
    /// Re-authentication presented valid credentials of another user; nothing changed.
    public static let userMismatch: ErrorCode = "user_mismatch"
    /// The provider identity is already linked to another user.
    public static let credentialAlreadyInUse: ErrorCode = "credential_already_in_use"
    /// The user already has an identity of this provider linked.
    public static let providerAlreadyLinked: ErrorCode = "provider_already_linked"
    /// The user has no identity of this provider to unlink.
    public static let providerNotLinked: ErrorCode = "provider_not_linked"
    /// Unlinking the provider would leave the user no way to sign in.
    public static let lastSignInMethod: ErrorCode = "last_sign_in_method"
    /// The provider's ID token was refused; `details["reason"]` names the check
    /// (`bad_signature`, `wrong_audience`, `expired`, `nonce_mismatch`, `replayed`, …).
    public static let invalidProviderToken: ErrorCode = "invalid_provider_token"
    /// The provider's keys could not be fetched in time; retry later.
    public static let providerUnavailable: ErrorCode = "provider_unavailable"
    /// No provider of that id is configured on this server.
    public static let unknownProvider: ErrorCode = "unknown_provider"
    /// The migration resume handle is unknown, expired, already used, or not this session's.
    public static let invalidResumeHandle: ErrorCode = "invalid_resume_handle"
    /// The password reset code is unknown, expired or already used (a newer request also voids
    /// older codes): ask for a new mail.
    public static let invalidResetCode: ErrorCode = "invalid_reset_code"
    /// The email verification code is unknown, expired, already used, or was mailed to an
    /// address the user no longer has: ask for a new verification mail.
    public static let invalidVerificationCode: ErrorCode = "invalid_verification_code"
    /// The email change (or revert) code is unknown, expired, already used, or voided by a
    /// newer change request.
    public static let invalidEmailChangeCode: ErrorCode = "invalid_email_change_code"
    /// Sign-in refused until the address is verified (`GATEHOUSE_EMAIL_VERIFICATION=required`).
    public static let emailNotVerified: ErrorCode = "email_not_verified"
    /// The address is already verified: no verification mail is sent.
    public static let emailAlreadyVerified: ErrorCode = "email_already_verified"

    // Token service (proto/token.proto).
    /// The refresh token is unknown, malformed or of an ended session.
    public static let invalidRefreshToken: ErrorCode = "invalid_refresh_token"
    /// A superseded refresh token was presented again: its whole session is now revoked.
    public static let refreshTokenReused: ErrorCode = "refresh_token_reused"
    /// The session passed its absolute lifetime or idle timeout.
    public static let sessionExpired: ErrorCode = "session_expired"
    /// The session was signed out or revoked.
    public static let sessionRevoked: ErrorCode = "session_revoked"
    /// The access token does not verify (signature, issuer, audience, key, form).
    public static let invalidToken: ErrorCode = "invalid_token"
    /// The access token is past its `exp`.
    public static let tokenExpired: ErrorCode = "token_expired"

    /// The admin API key is missing, malformed, unknown or revoked.
    public static let invalidAdminKey: ErrorCode = "invalid_admin_key"
    /// The admin API key lacks the scope the operation needs.
    public static let insufficientScope: ErrorCode = "insufficient_scope"
    /// No admin API key has this id.
    public static let adminKeyNotFound: ErrorCode = "admin_key_not_found"

    /// Every code above: the gateway's error table must map each one (a test checks it).
    public static let all: [ErrorCode] = [
        .internal, .unimplemented, .unsupportedVersion, .deadlineExceeded, .cancelled, .unavailable, .overloaded,
        .malformedRequest, .invalidArgument, .rateLimited, .permissionDenied,
        .invalidEmail, .weakPassword, .emailExists, .invalidCredentials, .userDisabled, .userNotFound, .versionConflict,
        .tooManyAttempts, .migrationRequired, .requiresRecentLogin, .userMismatch, .credentialAlreadyInUse,
        .providerAlreadyLinked, .providerNotLinked, .lastSignInMethod, .invalidProviderToken, .providerUnavailable, .unknownProvider,
        .invalidResumeHandle, .invalidResetCode,
        .invalidVerificationCode, .invalidEmailChangeCode, .emailNotVerified, .emailAlreadyVerified,
        .invalidRefreshToken, .refreshTokenReused, .sessionExpired, .sessionRevoked, .invalidToken, .tokenExpired,
        .invalidAdminKey, .insufficientScope, .adminKeyNotFound,
    ]
}
