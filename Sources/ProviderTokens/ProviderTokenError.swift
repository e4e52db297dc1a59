import Foundation

/// Why a provider's ID token was refused, or why it could not be checked.
///
/// Three stable codes (`code`), for the wire and the HTTP error table later:
/// `invalid_provider_token` (with a `reason`), `provider_unavailable` and `unknown_provider`.
/// Messages tell an app developer what to fix; none of them, nor any log line, contains the
/// token or a nonce.
public enum ProviderTokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The token is not one Gatehouse accepts; `reason` says which check refused it.
    case invalidToken(InvalidProviderTokenReason)
    /// The provider's keys could not be fetched within the deadline (down, hanging, an error
    /// status, an unreadable document). A 503-class failure: retrying later may work.
    case providerUnavailable(provider: String, detail: String)
    /// No provider of that name is configured.
    case unknownProvider(String)

    /// The stable error code.
    public var code: String {
        switch self {
        case .invalidToken: "invalid_provider_token"
        case .providerUnavailable: "provider_unavailable"
        case .unknownProvider: "unknown_provider"
        }
    }

    /// The refusal's reason, for `invalidToken`.
    public var reason: InvalidProviderTokenReason? {
        if case .invalidToken(let reason) = self { return reason }
        return nil
    }

    /// A message an app developer can act on.
    public var message: String {
        switch self {
        case .invalidToken(let reason): reason.message
        case .providerUnavailable(let provider, let detail):
            "the keys of provider \(provider) could not be fetched (\(detail)); try again later"
        case .unknownProvider(let name): "no provider named \(name.debugDescription) is configured"
        }
    }

    /// `code: message`, with the reason for an invalid token.
    public var description: String {
        if case .invalidToken(let reason) = self { return "\(code) (\(reason.rawValue)): \(message)" }
        return "\(code): \(message)"
    }
}

/// Each check `IDTokenVerifier` makes, as the reason of an `invalid_provider_token` refusal.
/// The raw values are stable and may travel on the wire as the error's detail.
public enum InvalidProviderTokenReason: String, Sendable, Equatable, CaseIterable {
    /// Not three base64url parts of JSON.
    case malformed
    /// `alg` is not RS256 or ES256 (`none` and every HMAC algorithm are refused).
    case algorithmNotAllowed = "algorithm_not_allowed"
    /// The header has no `kid`.
    case missingKeyID = "missing_kid"
    /// No key of the provider has that `kid`, even after the allowed refetch.
    case unknownKeyID = "unknown_kid"
    /// The key with that `kid` is of another type than `alg` needs.
    case keyAlgorithmMismatch = "key_algorithm_mismatch"
    /// The signature does not verify.
    case badSignature = "bad_signature"
    /// `iss` is not the provider's.
    case wrongIssuer = "wrong_issuer"
    /// No `aud` value is one of the configured client ids.
    case wrongAudience = "wrong_audience"
    /// `exp` has passed (beyond the allowed skew).
    case expired
    /// `iat` is in the future (beyond the allowed skew).
    case issuedInFuture = "issued_in_future"
    /// A required claim (`sub`, `exp`, `iat`, `aud`, `iss`) is missing or of the wrong type.
    case missingClaim = "missing_claim"
    /// The token's nonce is not the one the app sent (or its SHA-256, for Apple).
    case nonceMismatch = "nonce_mismatch"
    /// The app sent a nonce but the token carries none.
    case nonceMissing = "nonce_missing"
    /// The token carries a nonce but the app sent none.
    case unexpectedNonce = "unexpected_nonce"
    /// This token was already accepted once.
    case replayed

    /// What went wrong, in words an app developer can act on.
    public var message: String {
        switch self {
        case .malformed: "the ID token is not a compact JWS (three base64url parts of JSON)"
        case .algorithmNotAllowed: "the ID token's alg is not allowed (RS256 or ES256 only)"
        case .missingKeyID: "the ID token's header has no kid"
        case .unknownKeyID: "the ID token was signed with a key the provider does not publish (unknown kid)"
        case .keyAlgorithmMismatch: "the ID token's alg does not match the type of the provider's key with that kid"
        case .badSignature: "the ID token's signature does not verify against the provider's key"
        case .wrongIssuer: "the ID token was issued by another issuer than the provider's"
        case .wrongAudience: "the ID token was issued for another client id than the ones configured for this provider"
        case .expired: "the ID token has expired; get a fresh one from the provider"
        case .issuedInFuture: "the ID token's iat is in the future; check the device's clock"
        case .missingClaim: "the ID token lacks a required claim (sub, iss, aud, exp, iat) or has one of the wrong type"
        case .nonceMismatch: "the ID token's nonce does not match the nonce sent with it (Apple: send the raw nonce, not its hash)"
        case .nonceMissing: "a nonce was sent but the ID token carries none; pass the nonce to the provider's sign-in request"
        case .unexpectedNonce: "the ID token carries a nonce; send the nonce used for the sign-in with it"
        case .replayed: "the ID token was already used; sign in with the provider again for a fresh one"
        }
    }
}
