/// Token-service failures. Each case has one stable wire code (the mapping is in TokenService,
/// `TokenError.rpcError`).
public enum TokenError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The access token does not verify; the text says why (never shown with key material).
    case invalidToken(String)
    /// The access token is past its `exp`.
    case tokenExpired
    /// The refresh token is unknown or malformed.
    case invalidRefreshToken
    /// A superseded refresh token was presented again; its session is now revoked.
    case refreshTokenReused
    /// The session passed its lifetime or idle timeout.
    case sessionExpired
    /// The session was revoked.
    case sessionRevoked
    /// A request field is not acceptable; the text says which and why.
    case invalidArgument(String)

    /// A message safe to show a caller.
    public var message: String {
        switch self {
        case .invalidToken(let why): return "the access token is not valid: \(why)"
        case .tokenExpired: return "the access token has expired"
        case .invalidRefreshToken: return "the refresh token is not valid"
        case .refreshTokenReused: return "the refresh token was already used; the session has been revoked"
        case .sessionExpired: return "the session has expired; sign in again"
        case .sessionRevoked: return "the session has been revoked; sign in again"
        case .invalidArgument(let why): return why
        }
    }

    /// The same text as `message`.
    public var description: String { message }
}
