import Foundation

/// One server-to-server notification of Sign in with Apple, verified (`AppleNotificationVerifier`).
public struct AppleNotification: Sendable, Equatable {
    /// What happened.
    public enum EventType: String, Sendable, Equatable, CaseIterable {
        /// The user stopped email forwarding from their private relay address.
        case emailDisabled = "email-disabled"
        /// The user turned email forwarding from their private relay address back on.
        case emailEnabled = "email-enabled"
        /// The user stopped using Sign in with Apple with the app (the authorization is gone).
        case consentRevoked = "consent-revoked"
        /// The user deleted their Apple account.
        case accountDelete = "account-delete"
    }

    /// The event's type.
    public let type: EventType
    /// The user's `sub` at Apple (with the provider, the linked identity).
    public let sub: String
    /// The relay address concerned (email events).
    public let email: String?
    /// `is_private_email`, read from a boolean or `"true"`/`"false"`; nil when absent.
    public let isPrivateEmail: Bool?
    /// `event_time` (sent in milliseconds since 1970).
    public let eventTime: Date
    /// The client id the notification was sent for (`aud`).
    public let audience: String
    /// `iat`.
    public let issuedAt: Date
    /// `jti`, when present.
    public let jti: String?
    /// The key the verifier's replay guard remembers it by (`replayGuard.forget` it when acting
    /// on it failed, so Apple's retry is accepted).
    public var replayID = ""
}

/// Why a notification body was refused, or could not be checked.
///
/// Codes: `invalid_notification` (the JWS failed a check: `reason` says which, as for ID
/// tokens; or its `events` claim is unreadable), `unknown_event_type`, `provider_unavailable`
/// (Apple's keys could not be fetched). Messages hold no part of the notification but an
/// unknown event type's name.
public enum AppleNotificationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The JWS failed a check (`malformed`, `bad_signature`, `wrong_issuer`, `wrong_audience`,
    /// `expired`, `issued_in_future`, `missing_claim`, `replayed`, …).
    case invalidToken(InvalidProviderTokenReason)
    /// The signed `events` claim is missing or is not an event (`detail` says what is wrong).
    case invalidEvent(String)
    /// The event's `type` is not one this version knows.
    case unknownEventType(String)
    /// Apple's keys could not be fetched; Apple retries the notification later.
    case providerUnavailable(detail: String)

    /// The stable error code.
    public var code: String {
        switch self {
        case .invalidToken, .invalidEvent: "invalid_notification"
        case .unknownEventType: "unknown_event_type"
        case .providerUnavailable: "provider_unavailable"
        }
    }

    /// The refusal's reason, for `invalidToken`.
    public var reason: InvalidProviderTokenReason? {
        if case .invalidToken(let reason) = self { return reason }
        return nil
    }

    /// What went wrong.
    public var message: String {
        switch self {
        case .invalidToken(let reason): "the notification's JWS was refused (\(reason.rawValue))"
        case .invalidEvent(let detail): "the notification's events claim is unusable: \(detail)"
        case .unknownEventType(let type): "the notification's event type \(type.debugDescription) is unknown"
        case .providerUnavailable(let detail): "Apple's keys could not be fetched (\(detail))"
        }
    }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }

    init(_ error: ProviderTokenError) {
        switch error {
        case .invalidToken(let reason): self = .invalidToken(reason)
        case .providerUnavailable(_, let detail): self = .providerUnavailable(detail: detail)
        case .unknownProvider(let name): self = .providerUnavailable(detail: "no provider named \(name) is configured")
        }
    }
}
