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
        case .unavailable:
            return RPCError(.unavailable, "the user database is busy; retry later")
        case .storage:
            return RPCError(.internal, "internal error")
        }
    }

}
