import Foundation

/// Why a call failed. Each case the server can answer comes from its stable problem code
/// (`application/problem+json`); failures to reach the server are `network`, kept apart from
/// what the server said. `errorDescription` is a sentence fit to show a user.
public enum GatehouseError: Error, Sendable, Equatable, LocalizedError {
    /// The server could not be reached (no connection, a time-out, TLS): the underlying
    /// `URLError` code and its text. Nothing changed on the server as far as the app knows.
    case network(code: Int, message: String)
    /// No session on this device: sign in first.
    case notSignedIn
    /// The session ended (its refresh token was revoked, reused or expired, or the user was
    /// deleted): when the answer was to a call made with the device's session, the device is
    /// signed out.
    case sessionEnded(code: String)
    /// `invalid_credentials`: the email or password is wrong (the same for an unknown email).
    case invalidCredentials
    /// `email_exists`: another account has this address.
    case emailExists
    /// `invalid_email`: not an email address.
    case invalidEmail
    /// `invalid_argument`: a value the server refuses (too long, malformed); the message names it.
    case invalidArgument(message: String)
    /// `email_already_verified`: nothing to verify.
    case emailAlreadyVerified
    /// `unknown_provider`: the server has no such provider configured.
    case unknownProvider
    /// `weak_password`: the policy refused the password; `reasons` says why.
    case weakPassword(reasons: [String])
    /// `user_not_found`: no such user (an anonymous caller's sign-in to an unknown email: sign up
    /// and upgrade instead).
    case userNotFound
    /// `user_disabled`: an administrator disabled the account.
    case userDisabled
    /// `email_not_verified`: the address must be verified before signing in.
    case emailNotVerified
    /// `requires_recent_login`: re-authenticate (`reauthenticate`) and try again.
    case requiresRecentLogin(maxAgeSeconds: Int?)
    /// `user_mismatch`: the credentials belong to another user.
    case userMismatch
    /// `migration_required`: the anonymous user of this device signed in to an existing account;
    /// ask the user, then `resume(_:allowMigration:)`.
    case migrationRequired(MigrationContext)
    /// `credential_already_in_use`: the provider identity belongs to another user.
    case credentialAlreadyInUse
    /// `provider_already_linked`: the user already has this provider.
    case providerAlreadyLinked
    /// `provider_not_linked`: the user has no such provider.
    case providerNotLinked
    /// `last_sign_in_method`: the user would have no way left to sign in.
    case lastSignInMethod
    /// `invalid_provider_token`: the provider's ID token was refused; `reason` names the check.
    case invalidProviderToken(reason: String?)
    /// `invalid_resume_handle`, `invalid_reset_code`, `invalid_verification_code` or
    /// `invalid_email_change_code`: the code or handle is unknown, expired or used.
    case invalidCode(code: String)
    /// `rate_limited` or `too_many_attempts`: try again after `retryAfter` seconds.
    case rateLimited(code: String, retryAfter: Int?)
    /// `service_unavailable`, `overloaded`, `provider_unavailable`, `request_timeout`, …: try again shortly.
    case unavailable(code: String, retryAfter: Int?)
    /// An event stream ended for good (`account_deleted`, `signed_out`, `migrated`, …).
    case streamClosed(reason: String, message: String)
    /// Any other answer of the server: its status, stable code and message.
    case server(status: Int, code: String, message: String)
    /// The server's answer could not be read (not Gatehouse, or a version this library does not know).
    case invalidResponse(String)

    /// A sentence fit to show a user.
    public var errorDescription: String? {
        switch self {
        case .network: return "Cannot reach the server. Check your connection and try again."
        case .notSignedIn: return "You are not signed in."
        case .sessionEnded: return "Your session has ended. Please sign in again."
        case .invalidCredentials: return "The email or password is incorrect."
        case .emailExists: return "An account with this email address already exists."
        case .invalidEmail: return "This is not a valid email address."
        case .invalidArgument(let message): return message.isEmpty ? "Some of the information entered is not valid." : message
        case .emailAlreadyVerified: return "This email address is already verified."
        case .unknownProvider: return "This sign-in method is not available."
        case .weakPassword(let reasons):
            let hints = reasons.compactMap { Self.passwordHints[$0] }
            return hints.isEmpty ? "This password is too weak." : "This password is too weak: \(hints.joined(separator: "; "))."
        case .userNotFound: return "There is no account with this email address."
        case .userDisabled: return "This account has been disabled."
        case .emailNotVerified: return "Please verify your email address first: open the link in the mail we sent you."
        case .requiresRecentLogin: return "For your security, please sign in again before making this change."
        case .userMismatch: return "These credentials belong to another account."
        case .migrationRequired: return "An account with these credentials already exists."
        case .credentialAlreadyInUse: return "This sign-in is already used by another account."
        case .providerAlreadyLinked: return "This sign-in method is already linked to your account."
        case .providerNotLinked: return "This sign-in method is not linked to your account."
        case .lastSignInMethod: return "You cannot remove your only way to sign in."
        case .invalidProviderToken: return "The sign-in could not be verified. Please try again."
        case .invalidCode: return "This code is invalid or has expired. Please ask for a new one."
        case .rateLimited(_, let retryAfter):
            if let retryAfter { return "Too many attempts. Try again in \(retryAfter) seconds." }
            return "Too many attempts. Try again later."
        case .unavailable: return "The service is unavailable right now. Try again shortly."
        case .streamClosed(_, let message): return message.isEmpty ? "Live updates ended." : message
        case .server(_, _, let message): return message.isEmpty ? "Something went wrong. Try again." : message
        case .invalidResponse: return "The server's answer could not be read."
        }
    }

    /// Whether the server was not reached (retrying may help); false for answers of the server.
    public var isNetworkError: Bool {
        if case .network = self { return true }
        return false
    }

    /// Whether a call that can be tried again later (the server was not reached, or was busy).
    public var isRetryable: Bool {
        switch self {
        case .network, .unavailable, .rateLimited: return true
        default: return false
        }
    }

    /// Whether the server said the session no longer works (its refresh: the device signs out).
    var endsSession: Bool {
        switch self {
        case .sessionEnded, .userDisabled: return true
        default: return false
        }
    }

    /// The server's stable code (`invalid_credentials`, …), nil for failures that are not an answer of the server.
    public var code: String? {
        switch self {
        case .network, .notSignedIn, .invalidResponse, .streamClosed: return nil
        case .sessionEnded(let code), .invalidCode(let code), .rateLimited(let code, _), .unavailable(let code, _), .server(_, let code, _):
            return code
        case .invalidCredentials: return "invalid_credentials"
        case .emailExists: return "email_exists"
        case .invalidEmail: return "invalid_email"
        case .invalidArgument: return "invalid_argument"
        case .emailAlreadyVerified: return "email_already_verified"
        case .unknownProvider: return "unknown_provider"
        case .weakPassword: return "weak_password"
        case .userNotFound: return "user_not_found"
        case .userDisabled: return "user_disabled"
        case .emailNotVerified: return "email_not_verified"
        case .requiresRecentLogin: return "requires_recent_login"
        case .userMismatch: return "user_mismatch"
        case .migrationRequired: return "migration_required"
        case .credentialAlreadyInUse: return "credential_already_in_use"
        case .providerAlreadyLinked: return "provider_already_linked"
        case .providerNotLinked: return "provider_not_linked"
        case .lastSignInMethod: return "last_sign_in_method"
        case .invalidProviderToken: return "invalid_provider_token"
        }
    }

    /// What each `weak_password` reason means, for a person.
    static let passwordHints: [String: String] = [
        "empty": "enter a password", "too_short": "use at least 8 characters", "too_long": "use fewer characters",
        "common_password": "it is one of the most common passwords", "matches_email": "it must not be your email address",
        "invalid_characters": "it contains characters that cannot be typed",
    ]

    /// The codes with which the server says a session (its tokens) no longer works.
    static let sessionCodes: Set<String> = [
        "invalid_token", "token_expired", "invalid_refresh_token", "refresh_token_reused", "session_expired", "session_revoked",
    ]

    /// Every problem code of the server that has a case of its own here (`fromProblem`): those
    /// named in its switch, the session codes, and the gateway's `503` codes (`unavailable`).
    /// `GatehouseClientTests` ties this list and `serverCodes` to the contract's codes and the
    /// gateway's error table, both ways.
    static let mappedCodes: Set<String> = sessionCodes.union([
        "invalid_credentials", "email_exists", "invalid_email", "invalid_argument", "email_already_verified", "unknown_provider",
        "weak_password", "user_not_found", "user_disabled", "email_not_verified", "requires_recent_login", "user_mismatch",
        "migration_required", "credential_already_in_use", "provider_already_linked", "provider_not_linked",
        "last_sign_in_method", "invalid_provider_token", "invalid_resume_handle", "invalid_reset_code",
        "invalid_verification_code", "invalid_email_change_code", "rate_limited", "too_many_attempts", "request_timeout",
        "service_unavailable", "overloaded", "provider_unavailable", "too_many_connections", "too_many_streams",
    ])

    /// The codes of the public API this library leaves as `server(status:code:message:)`: answers
    /// to requests it does not make (a malformed body or HTTP message, an unknown path or method,
    /// a missing token, an origin the server refuses) or that an app can only show (`internal`).
    static let serverCodes: Set<String> = [
        "malformed_request", "malformed_http", "incomplete_body", "uri_too_long", "header_fields_too_large", "http_version_not_supported",
        "payload_too_large", "unsupported_media_type", "not_found", "method_not_allowed", "unauthenticated",
        "origin_not_allowed", "version_conflict", "invalid_last_event_id", "internal",
    ]

    /// The error for a problem+json answer of `status` (`body` as sent), with `Retry-After`.
    static func fromProblem(status: Int, body: Data, retryAfter: String?) -> GatehouseError {
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any], let code = object["code"] as? String else {
            // Not Gatehouse's answer: a proxy in front of it that timed out or found it down.
            if [408, 502, 503, 504].contains(status) { return .unavailable(code: "http_\(status)", retryAfter: nil) }
            return .server(status: status, code: "", message: "")
        }
        let message = object["detail"] as? String ?? ""
        let retry = retryAfter.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        switch code {
        case "invalid_credentials": return .invalidCredentials
        case "email_exists": return .emailExists
        case "invalid_email": return .invalidEmail
        case "invalid_argument": return .invalidArgument(message: message)
        case "email_already_verified": return .emailAlreadyVerified
        case "unknown_provider": return .unknownProvider
        case "weak_password": return .weakPassword(reasons: object["reasons"] as? [String] ?? [])
        case "user_not_found": return .userNotFound
        case "user_disabled": return .userDisabled
        case "email_not_verified": return .emailNotVerified
        case "requires_recent_login": return .requiresRecentLogin(maxAgeSeconds: (object["maxAgeSeconds"] as? NSNumber)?.intValue)
        case "user_mismatch": return .userMismatch
        case "migration_required":
            guard let anonymous = object["anonymousUserId"] as? String, let existing = object["existingUserId"] as? String,
                let handle = object["resumeHandle"] as? String
            else { return .invalidResponse("migration_required without its handle") }
            return .migrationRequired(
                MigrationContext(
                    anonymousUserID: anonymous, existingUserID: existing, resumeHandle: handle,
                    expiresIn: (object["resumeHandleExpiresIn"] as? NSNumber)?.intValue ?? 0))
        case "credential_already_in_use": return .credentialAlreadyInUse
        case "provider_already_linked": return .providerAlreadyLinked
        case "provider_not_linked": return .providerNotLinked
        case "last_sign_in_method": return .lastSignInMethod
        case "invalid_provider_token": return .invalidProviderToken(reason: object["reason"] as? String)
        case "invalid_resume_handle", "invalid_reset_code", "invalid_verification_code", "invalid_email_change_code":
            return .invalidCode(code: code)
        case "rate_limited", "too_many_attempts": return .rateLimited(code: code, retryAfter: retry)
        // The request did not reach the gateway in time (a slow network): as a proxy's 408.
        case "request_timeout": return .unavailable(code: code, retryAfter: retry)
        case _ where status == 503: return .unavailable(code: code, retryAfter: retry)
        case _ where sessionCodes.contains(code): return .sessionEnded(code: code)
        default: return .server(status: status, code: code, message: message)
        }
    }
}
