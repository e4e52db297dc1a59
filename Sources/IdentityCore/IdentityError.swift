

/// Every failure the identity service reports. Each case has one stable wire code (the mapping
/// is in IdentityService, `IdentityError.rpcError`); storage failures carry a cause for the log
/// that never reaches the caller.
public enum IdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidEmail(reason: String)
    case weakPassword([PasswordPolicy.Violation])
    case emailExists
    case invalidCredentials
    case userDisabled
    case userNotFound
    case versionConflict(current: Int64)
    case invalidArgument(field: String, reason: String)
    /// The password hashing queue is full; retry later.
    case overloaded
    /// Too many failed password checks for this account (or this email, whether or not it
    /// exists); the next attempt is accepted in `retryAfterSeconds`.
    case tooManyAttempts(retryAfterSeconds: Int)
    /// An anonymous user signed in to an existing account without a migration decision; the
    /// handle resumes the sign-in within `expiresInSeconds` without the credentials.
    case migrationRequired(anonymousUserID: String, existingUserID: String, resumeHandle: String, expiresInSeconds: Int)
    /// The operation needs a more recent sign-in or re-authentication.
    case requiresRecentLogin(windowSeconds: Int)
    /// Re-authentication with another user's (valid) credentials.
    case userMismatch
    /// The provider identity is linked to another user.
    case credentialAlreadyInUse
    /// The user already has an identity of this provider.
    case providerAlreadyLinked
    /// The user has no identity of this provider to unlink.
    case providerNotLinked
    /// Unlinking would leave the user no way to sign in (no password, no other provider).
    case lastSignInMethod
    /// The provider's ID token was refused: `reason` names the check (stable), `message` says
    /// what to fix. Neither contains the token.
    case invalidProviderToken(reason: String, message: String)
    /// The provider's keys could not be fetched in time.
    case providerUnavailable(provider: String)
    /// No provider of that id is configured.
    case unknownProvider(String)
    /// The resume handle is unknown, expired, used, or bound to another session.
    case invalidResumeHandle
    /// The password reset code is unknown, expired or already used.
    case invalidResetCode
    /// The email verification code is unknown, expired, used, or for an address the user no longer has.
    case invalidVerificationCode
    /// The email change or revert code is unknown, expired, used or voided.
    case invalidEmailChangeCode
    /// Password sign-in needs a verified address (`GATEHOUSE_EMAIL_VERIFICATION=required`).
    case emailNotVerified
    /// The address is already verified.
    case emailAlreadyVerified
    /// The admin API key is malformed, unknown or revoked.
    case invalidAdminKey
    /// No admin API key has this id.
    case adminKeyNotFound
    /// This user or address had mail of this kind too recently; retry after `retryAfterSeconds`.
    case mailRateLimited(retryAfterSeconds: Int)
    /// The database is busy or unreachable.
    case unavailable(cause: String)
    /// The database failed in a way the caller cannot fix (the cause is only logged).
    case storage(cause: String)

    /// A short English line for logs; not the wire message (see `rpcError` in IdentityService).
    public var description: String {
        switch self {
        case .storage(let cause): return "storage failure: \(cause)"
        case .unavailable(let cause): return "storage unavailable: \(cause)"
        case .invalidEmail(let reason): return "invalid email: \(reason)"
        case .weakPassword(let violations): return "weak password: \(violations.map(\.rawValue).joined(separator: ","))"
        case .emailExists: return "email exists"
        case .invalidCredentials: return "invalid credentials"
        case .userDisabled: return "user disabled"
        case .userNotFound: return "user not found"
        case .versionConflict(let current): return "version conflict (current \(current))"
        case .invalidArgument(let field, let reason): return "\(field): \(reason)"
        case .overloaded: return "overloaded"
        case .tooManyAttempts(let seconds): return "too many failed attempts (retry after \(seconds) s)"
        case .migrationRequired(let anonymous, let existing, _, _): return "migration required (\(anonymous) → \(existing))"
        case .requiresRecentLogin: return "requires recent login"
        case .userMismatch: return "user mismatch"
        case .credentialAlreadyInUse: return "credential already in use"
        case .providerAlreadyLinked: return "provider already linked"
        case .providerNotLinked: return "provider not linked"
        case .invalidProviderToken(let reason, _): return "invalid provider token (\(reason))"
        case .providerUnavailable(let provider): return "provider \(provider) unavailable"
        case .unknownProvider(let provider): return "unknown provider \(provider)"
        case .lastSignInMethod: return "last sign-in method"
        case .invalidResumeHandle: return "invalid resume handle"
        case .invalidVerificationCode: return "invalid verification code"
        case .invalidEmailChangeCode: return "invalid email change code"
        case .emailNotVerified: return "email not verified"
        case .emailAlreadyVerified: return "email already verified"
        case .mailRateLimited(let seconds): return "mail rate limited (retry after \(seconds) s)"
        case .invalidResetCode: return "invalid reset code"
        case .invalidAdminKey: return "invalid admin key"
        case .adminKeyNotFound: return "admin key not found"
        }
    }
}
