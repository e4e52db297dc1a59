import GatehouseProtocol

extension ErrorCode {
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
}

/// Every failure the identity service reports. Each case has one stable wire code; storage
/// failures carry a cause for the log that never reaches the caller.
public enum IdentityError: Error, Sendable, Equatable, RPCErrorConvertible, CustomStringConvertible {
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
    /// The database is busy or unreachable.
    case unavailable(cause: String)
    /// The database failed in a way the caller cannot fix (the cause is only logged).
    case storage(cause: String)

    /// The stable wire code of this error.
    public var code: ErrorCode { rpcError.code }

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
        case .unavailable:
            return RPCError(.unavailable, "the user database is busy; retry later")
        case .storage:
            return RPCError(.internal, "internal error")
        }
    }

    public var description: String {
        switch self {
        case .storage(let cause): return "storage failure: \(cause)"
        case .unavailable(let cause): return "storage unavailable: \(cause)"
        default: return rpcError.description
        }
    }
}
