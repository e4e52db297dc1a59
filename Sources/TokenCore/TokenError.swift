import GatehouseProtocol

/// Token-service failures with their stable codes.
public struct TokenError: Error, RPCErrorConvertible, Equatable, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var rpcError: RPCError { RPCError(code, message) }
    public var description: String { "\(code): \(message)" }

    public static func invalidToken(_ why: String) -> TokenError { TokenError(.invalidToken, "the access token is not valid: \(why)") }
    public static let tokenExpired = TokenError(.tokenExpired, "the access token has expired")
    public static let invalidRefreshToken = TokenError(.invalidRefreshToken, "the refresh token is not valid")
    public static let refreshTokenReused = TokenError(.refreshTokenReused, "the refresh token was already used; the session has been revoked")
    public static let sessionExpired = TokenError(.sessionExpired, "the session has expired; sign in again")
    public static let sessionRevoked = TokenError(.sessionRevoked, "the session has been revoked; sign in again")
    public static func invalidArgument(_ why: String) -> TokenError { TokenError(.invalidArgument, why) }
}
