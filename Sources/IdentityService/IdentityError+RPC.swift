import IdentityPorts
import GatehouseContracts
import IdentityCore

extension IdentityError: RPCErrorConvertible {
    /// The stable wire code of this error.
    public var code: ErrorCode { rpcError.code }

    /// The wire form: one stable code per case, a message safe to show a caller.
    public var rpcError: RPCError {
        switch self {
        case .invalidEmail(let reason):
            return RPCError(.invalidEmail, "the email address is not valid: \(reason)")
        case .weakPassword(let violations):
            return RPCError(
                .weakPassword, "the password does not meet the policy",
                details: ["reasons": violations.map(\.rawValue).joined(separator: ",")])
        case .emailExists:
            return RPCError(.emailExists, "a user with this email address already exists")
        case .invalidCredentials:
            return RPCError(.invalidCredentials, "the email or password is wrong")
        case .userDisabled:
            return RPCError(.userDisabled, "this user is disabled")
        case .userNotFound:
            return RPCError(.userNotFound, "no user has this id")
        case .versionConflict(let current):
            return RPCError(
                .versionConflict, "the user was changed by someone else; reload and retry",
                details: ["currentVersion": String(current)])
        case .invalidArgument(let field, let reason):
            return RPCError(.invalidArgument, "\(field): \(reason)", details: ["field": field])
        case .overloaded:
            return RPCError(.overloaded, "the service is busy; retry later")
        case .tooManyAttempts(let seconds):
            return RPCError(
                .tooManyAttempts, "too many failed attempts for this account; retry later",
                details: [RPCError.retryAfterKey: String(seconds)])
        case .migrationRequired(let anonymous, let existing, let handle, let expiresIn):
            return RPCError(
                .migrationRequired,
                "this account exists and you are signed in anonymously: resume with the handle and allowMigration true or false",
                details: [
                    "anonymousUserId": anonymous, "existingUserId": existing, "resumeHandle": handle,
                    "resumeHandleExpiresIn": String(expiresIn),
                ])
        case .requiresRecentLogin(let window):
            return RPCError(
                .requiresRecentLogin,
                "this change needs a sign-in within the last \(window) seconds: re-authenticate, then retry",
                details: ["maxAgeSeconds": String(window)])
        case .userMismatch:
            return RPCError(.userMismatch, "these credentials belong to another user; sign in again as the current user")
        case .credentialAlreadyInUse:
            return RPCError(.credentialAlreadyInUse, "this sign-in is already linked to another account")
        case .providerAlreadyLinked:
            return RPCError(.providerAlreadyLinked, "this account already has a sign-in of this provider")
        case .invalidProviderToken(let reason, let message):
            return RPCError(.invalidProviderToken, message, details: ["reason": reason])
        case .providerUnavailable(let provider):
            return RPCError(.providerUnavailable, "the keys of provider \(provider) could not be fetched in time; try again later")
        case .unknownProvider(let provider):
            return RPCError(
                .unknownProvider, "no provider \(provider.debugDescription) is configured on this server (apple.com, google.com or oidc.<name>)")
        case .providerNotLinked:
            return RPCError(.providerNotLinked, "this account has no sign-in of this provider to unlink")
        case .lastSignInMethod:
            return RPCError(
                .lastSignInMethod,
                "this is the account's only way to sign in: set a password or link another provider before unlinking it")
        case .invalidResumeHandle:
            return RPCError(
                .invalidResumeHandle, "the resume handle is unknown, expired or already used: sign in again")
        case .invalidResetCode:
            return RPCError(
                .invalidResetCode, "the reset code is unknown, expired or already used: ask for a new password reset mail")
        case .invalidVerificationCode:
            return RPCError(
                .invalidVerificationCode,
                "the verification code is unknown, expired, already used, or for an address this account no longer has: ask for a new verification mail")
        case .invalidEmailChangeCode:
            return RPCError(
                .invalidEmailChangeCode, "the email change code is unknown, expired, already used, or voided by a newer change")
        case .emailNotVerified:
            return RPCError(
                .emailNotVerified, "this account's email address is not verified yet: open the link in the verification mail, or ask for a new one")
        case .emailAlreadyVerified:
            return RPCError(.emailAlreadyVerified, "this email address is already verified")
        case .invalidAdminKey:
            return RPCError(.invalidAdminKey, "the admin API key is malformed, unknown or revoked")
        case .adminKeyNotFound:
            return RPCError(.adminKeyNotFound, "no admin API key has this id")
        case .mailRateLimited(let seconds):
            return RPCError(
                .rateLimited, "a mail of this kind was sent to this account too recently; retry later",
                details: [RPCError.retryAfterKey: String(seconds)])
        case .unavailable:
            return RPCError(.unavailable, "the user database is busy; retry later")
        case .storage:
            return RPCError(.internal, "internal error")
        }
    }

}
