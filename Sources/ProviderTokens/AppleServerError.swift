import Foundation

/// Why a call to Apple's token or revoke endpoint failed.
///
/// Stable codes (`code`): `invalid_grant` (the authorization code or refresh token is expired,
/// already used, revoked, or was issued to another client: the user signs in again),
/// `provider_rejected` (Apple refused the request for another reason, e.g. `invalid_client`: our
/// team id, key id, key or client id is wrong, an operator's problem), `provider_unavailable`
/// (unreachable, a 5xx, an unreadable answer, no answer by the deadline: retrying later may work)
/// and `unknown_client` (no client secret is configured for that client id). No message holds a
/// code, a token or a secret.
public enum AppleServerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Apple answered `{"error": "invalid_grant"}`.
    case invalidGrant
    /// Apple refused the request with another error (`invalid_client`, `invalid_request`,
    /// `unauthorized_client`, …) and HTTP status.
    case rejected(error: String, status: Int)
    /// Apple could not be reached, failed, or did not answer by the deadline.
    case unavailable(detail: String)
    /// No client secret is configured for the client id.
    case unknownClient(String)

    /// The stable error code.
    public var code: String {
        switch self {
        case .invalidGrant: "invalid_grant"
        case .rejected: "provider_rejected"
        case .unavailable: "provider_unavailable"
        case .unknownClient: "unknown_client"
        }
    }

    /// A message an app developer or operator can act on.
    public var message: String {
        switch self {
        case .invalidGrant:
            "Apple refused the authorization code or refresh token (expired, already used, revoked, or issued to another client id)"
        case .rejected(let error, let status):
            "Apple refused the request with \(error) (HTTP \(status)); check the team id, key id, .p8 key, client id and redirect URI"
        case .unavailable(let detail): "Apple's server could not be used (\(detail)); try again later"
        case .unknownClient(let clientID): "no Sign in with Apple client secret is configured for client id \(clientID.debugDescription)"
        }
    }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }
}

/// What Apple's token endpoint answers for an authorization code.
///
/// Its description hides the tokens. The `idToken` must still be verified
/// (`IDTokenVerifier.verify(idToken:provider:nonce:)`) before its claims are believed.
public struct AppleTokenResponse: Sendable, Equatable, Decodable, CustomStringConvertible, CustomDebugStringConvertible {
    /// `access_token` (Apple's; currently unused by Apple's APIs but returned).
    public let accessToken: String
    /// `refresh_token`: kept to revoke the authorization when the account is deleted.
    public let refreshToken: String?
    /// `id_token`: the user's ID token, to verify.
    public let idToken: String
    /// `expires_in`, in seconds (the access token's lifetime).
    public let expiresIn: Int
    /// `token_type` (`bearer`).
    public let tokenType: String

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case expiresIn = "expires_in"
        case tokenType = "token_type"
    }

    /// A response with these values (for tests and fakes).
    public init(accessToken: String, refreshToken: String?, idToken: String, expiresIn: Int, tokenType: String = "bearer") {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.expiresIn = expiresIn
        self.tokenType = tokenType
    }

    /// The token type and lifetime only.
    public var description: String {
        "AppleTokenResponse(token_type: \(tokenType), expires_in: \(expiresIn), refresh_token: \(refreshToken == nil ? "absent" : "present"))"
    }

    /// As `description`: never the tokens.
    public var debugDescription: String { description }
}

/// Which kind of token is revoked (`token_type_hint`).
public enum AppleTokenTypeHint: String, Sendable, Equatable {
    /// A refresh token (revokes the user's authorization of the app).
    case refreshToken = "refresh_token"
    /// An access token.
    case accessToken = "access_token"
}
