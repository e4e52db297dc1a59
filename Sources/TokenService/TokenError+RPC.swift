import GatehouseContracts
import TokenCore

extension TokenError: RPCErrorConvertible {
    /// The stable wire code of this error.
    public var code: ErrorCode {
        switch self {
        case .invalidToken: return .invalidToken
        case .tokenExpired: return .tokenExpired
        case .invalidRefreshToken: return .invalidRefreshToken
        case .refreshTokenReused: return .refreshTokenReused
        case .sessionExpired: return .sessionExpired
        case .sessionRevoked: return .sessionRevoked
        case .invalidArgument: return .invalidArgument
        }
    }

    /// The wire form: the stable code and a message safe to show a caller.
    public var rpcError: RPCError { RPCError(code, message) }
}
