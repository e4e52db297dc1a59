public import GatehouseContracts
public import HTTPTypes

/// Codes the HTTP layer makes itself (they never cross an RPC link, so they are not in the
/// contract). Each is in the error table like every service code.
extension ErrorCode {
    /// The request body is not `application/json`.
    public static let unsupportedMediaType: ErrorCode = "unsupported_media_type"
    /// The request body is over the size limit.
    public static let payloadTooLarge: ErrorCode = "payload_too_large"
    /// No such resource.
    public static let notFound: ErrorCode = "not_found"
    /// The path exists but not with this method (`Allow` lists those that do).
    public static let methodNotAllowed: ErrorCode = "method_not_allowed"
    /// No bearer token was presented.
    public static let unauthenticated: ErrorCode = "unauthenticated"
    /// The `Origin` is not in the allowed list.
    public static let originNotAllowed: ErrorCode = "origin_not_allowed"
    /// A service could not be reached in time; retry.
    public static let serviceUnavailable: ErrorCode = "service_unavailable"
    /// The request is not valid HTTP/1.1 (bad request line, header, chunk size, or conflicting
    /// `Content-Length`/`Transfer-Encoding`); the connection is closed after the answer.
    public static let malformedHTTP: ErrorCode = "malformed_http"
    /// The connection ended (or the client stopped sending) before the announced body arrived.
    public static let incompleteBody: ErrorCode = "incomplete_body"
    /// The request head or body did not arrive within the gateway's timeout.
    public static let requestTimeout: ErrorCode = "request_timeout"
    /// The request line is longer than the gateway reads (8 KiB).
    public static let uriTooLong: ErrorCode = "uri_too_long"
    /// The request line or header fields are over the parser's limits.
    public static let headerFieldsTooLarge: ErrorCode = "header_fields_too_large"
    /// The request is not HTTP/1.x.
    public static let httpVersionNotSupported: ErrorCode = "http_version_not_supported"
    /// The gateway, or this client address, already has as many open connections as allowed.
    public static let tooManyConnections: ErrorCode = "too_many_connections"
    /// This gateway already holds as many `GET /v1/me/events` streams as allowed (`GATEHOUSE_STREAM_MAX`).
    public static let tooManyStreams: ErrorCode = "too_many_streams"
    /// The `Last-Event-ID` of `GET /v1/me/events` is not an event id (a decimal number).
    public static let invalidLastEventID: ErrorCode = "invalid_last_event_id"
}

/// The one error table of the HTTP API: for every stable code, its HTTP status, the headers that
/// go with it, whether the detail is fixed (so a service's text never leaks), and the code a
/// client sees when it is not the code itself. The problem `type` is always
/// `https://gatehouse.dev/errors/<code>` (`GatewayError.typeURI`).
///
/// | code | status |
/// |---|---|
/// | `malformed_request`, `malformed_http`, `incomplete_body`, `invalid_last_event_id` | 400 |
/// | `invalid_argument`, `invalid_email`, `weak_password` (+ `reasons`) | 422 |
/// | `unauthenticated`, `invalid_credentials` | 401, `WWW-Authenticate: Bearer realm="gatehouse"` |
/// | `invalid_token`, `token_expired`, `invalid_refresh_token`, `refresh_token_reused`, `session_expired`, `session_revoked` | 401, `… error="invalid_token"` |
/// | `invalid_resume_handle`, `invalid_reset_code`, `invalid_verification_code`, `invalid_email_change_code` | 400 |
/// | `user_disabled`, `origin_not_allowed`, `requires_recent_login`, `user_mismatch`, `email_not_verified` | 403 |
/// | `user_not_found`, `not_found` | 404 |
/// | `method_not_allowed` | 405, `Allow` |
/// | `email_exists`, `version_conflict`, `credential_already_in_use`, `provider_already_linked`, `email_already_verified` | 409 |
/// | `migration_required` (+ `anonymousUserId`, `existingUserId`, `resumeHandle`, `resumeHandleExpiresIn`) | 409 |
/// | `request_timeout` | 408 |
/// | `payload_too_large` | 413 |
/// | `uri_too_long` | 414 |
/// | `unsupported_media_type` | 415 |
/// | `rate_limited`, `too_many_attempts` | 429, `Retry-After` |
/// | `header_fields_too_large` | 431 |
/// | `overloaded`, `too_many_connections`, `too_many_streams` | 503, `Retry-After` |
/// | `service_unavailable` (and `unavailable`, `deadline_exceeded`, `cancelled`) | 503, `Retry-After` |
/// | `http_version_not_supported` | 505 |
/// | `internal` (and `unimplemented`, `unsupported_version`, `permission_denied`, and any unknown code) | 500, generic detail |
public enum ErrorTable {
    /// The extra headers of an error.
    public enum Headers: Sendable {
        case none
        /// `WWW-Authenticate: Bearer realm="gatehouse"`.
        case bearerChallenge
        /// `WWW-Authenticate: Bearer realm="gatehouse", error="invalid_token"`.
        case invalidTokenChallenge
        /// `Retry-After: 1`.
        case retryAfter
        /// `Retry-After` with the service's `details["retryAfter"]` (whole seconds, 1 to 86 400), else 1.
        case retryAfterFromDetails

        /// The header fields, given the service error's `details`.
        func fields(_ details: [String: String] = [:]) -> HTTPFields {
            switch self {
            case .none: return [:]
            case .bearerChallenge: return [.wwwAuthenticate: GatewayError.realm]
            case .invalidTokenChallenge: return [.wwwAuthenticate: #"\#(GatewayError.realm), error="invalid_token""#]
            case .retryAfter: return [.retryAfter: "1"]
            case .retryAfterFromDetails:
                let seconds = details[RPCError.retryAfterKey].flatMap { Int($0) }.map { min(max($0, 1), 86_400) } ?? 1
                return [.retryAfter: String(seconds)]
            }
        }
    }

    /// One row of the table.
    public struct Entry: Sendable {
        /// The HTTP status.
        public var status: HTTPResponse.Status
        /// Extra headers.
        public var headers: Headers
        /// A fixed detail replacing the service's message; nil keeps the message.
        public var detail: String?
        /// The code clients see instead of this one; nil: the code itself.
        public var publicCode: ErrorCode?
        /// The service error's `details` keys copied into the problem body as members (e.g.
        /// `migration_required`'s user ids and resume handle): durations (`…ExpiresIn`,
        /// `…Seconds`) as numbers, the others as strings; every other key stays inside.
        public var members: [String]

        init(
            _ status: HTTPResponse.Status, _ headers: Headers = .none, detail: String? = nil, publicCode: ErrorCode? = nil,
            members: [String] = []
        ) {
            self.status = status
            self.headers = headers
            self.detail = detail
            self.publicCode = publicCode
            self.members = members
        }
    }

    static let busy = "The service is busy; try again."
    static let unavailable = Entry(.serviceUnavailable, .retryAfter, detail: "The service is unavailable; try again.", publicCode: .serviceUnavailable)
    static let `internal` = Entry(.internalServerError, detail: "Internal error.", publicCode: .internal)

    /// Every code the HTTP API answers with, service codes and its own.
    public static let entries: [ErrorCode: Entry] = [
        .malformedRequest: Entry(.badRequest),
        .invalidArgument: Entry(.unprocessableContent),
        .invalidEmail: Entry(.unprocessableContent),
        .weakPassword: Entry(.unprocessableContent),
        // Same body for an unknown email and a wrong password: never echo the service's text.
        .invalidCredentials: Entry(.unauthorized, .bearerChallenge, detail: "The email or password is incorrect."),
        .unauthenticated: Entry(.unauthorized, .bearerChallenge),
        .invalidToken: Entry(.unauthorized, .invalidTokenChallenge),
        .tokenExpired: Entry(.unauthorized, .invalidTokenChallenge),
        .invalidRefreshToken: Entry(.unauthorized, .invalidTokenChallenge),
        .refreshTokenReused: Entry(.unauthorized, .invalidTokenChallenge),
        .sessionExpired: Entry(.unauthorized, .invalidTokenChallenge),
        .sessionRevoked: Entry(.unauthorized, .invalidTokenChallenge),
        .userDisabled: Entry(.forbidden),
        .originNotAllowed: Entry(.forbidden),
        .userNotFound: Entry(.notFound),
        .notFound: Entry(.notFound),
        .methodNotAllowed: Entry(.methodNotAllowed),
        .emailExists: Entry(.conflict),
        .versionConflict: Entry(.conflict),
        .migrationRequired: Entry(
            .conflict, members: ["anonymousUserId", "existingUserId", "resumeHandle", "resumeHandleExpiresIn"]),
        .requiresRecentLogin: Entry(.forbidden, members: ["maxAgeSeconds"]),
        .userMismatch: Entry(.forbidden, detail: "These credentials belong to another user; sign in again as the current user."),
        .credentialAlreadyInUse: Entry(.conflict),
        .providerAlreadyLinked: Entry(.conflict),
        .providerNotLinked: Entry(.notFound),
        .lastSignInMethod: Entry(.conflict),
        // The reason (which check refused the token) helps an app developer; never the token.
        .invalidProviderToken: Entry(.unauthorized, members: ["reason"]),
        .providerUnavailable: Entry(.serviceUnavailable, .retryAfter),
        .unknownProvider: Entry(.badRequest),
        .invalidResumeHandle: Entry(.badRequest),
        .invalidResetCode: Entry(.badRequest, detail: "The reset code is unknown, expired or already used: ask for a new password reset mail."),
        .invalidVerificationCode: Entry(
            .badRequest,
            detail: "The verification code is unknown, expired, already used, or for an address this account no longer has: ask for a new verification mail."),
        .invalidEmailChangeCode: Entry(
            .badRequest, detail: "The email change code is unknown, expired, already used, or voided by a newer change."),
        .emailNotVerified: Entry(
            .forbidden,
            detail: "This account's email address is not verified yet: open the link in the verification mail, or ask for a new one."),
        .emailAlreadyVerified: Entry(.conflict, detail: "This email address is already verified."),
        // The admin listener's (issue 22 §1): never the service's text for a refused key.
        .invalidAdminKey: Entry(
            .unauthorized, .bearerChallenge,
            detail: "The admin API key is missing, malformed, unknown or revoked: send Authorization: Bearer gha_<id>.<secret>."),
        .insufficientScope: Entry(.forbidden),
        .adminKeyNotFound: Entry(.notFound),
        .payloadTooLarge: Entry(.contentTooLarge),
        .unsupportedMediaType: Entry(.unsupportedMediaType),
        .rateLimited: Entry(.tooManyRequests, .retryAfterFromDetails),
        // Same body whether or not the account exists.
        .tooManyAttempts: Entry(
            .tooManyRequests, .retryAfterFromDetails, detail: "Too many failed attempts for this account; try again after the time in Retry-After."),
        .overloaded: Entry(.serviceUnavailable, .retryAfter, detail: busy),
        // The HTTP layer's own rejections (the connection handler answers these itself).
        .malformedHTTP: Entry(.badRequest),
        .incompleteBody: Entry(.badRequest),
        .requestTimeout: Entry(.requestTimeout),
        .uriTooLong: Entry(.uriTooLong),
        .headerFieldsTooLarge: Entry(.requestHeaderFieldsTooLarge),
        .httpVersionNotSupported: Entry(.httpVersionNotSupported),
        .tooManyConnections: Entry(.serviceUnavailable, .retryAfter),
        .tooManyStreams: Entry(
            .serviceUnavailable, .retryAfter, detail: "This gateway holds as many event streams as it may; reconnect after the time in Retry-After."),
        .invalidLastEventID: Entry(
            .badRequest, detail: "Last-Event-ID must be the id of an event of this stream (a decimal number); reconnect without it for a fresh snapshot."),
        .serviceUnavailable: unavailable,
        .unavailable: unavailable,
        .deadlineExceeded: unavailable,
        .cancelled: unavailable,
        .internal: `internal`,
        .unimplemented: `internal`,
        // A service refused the gateway's key for a method: a deployment mistake, not the client's.
        .permissionDenied: `internal`,
        .unsupportedVersion: `internal`,
    ]

    /// The row for `code`; an unknown code is `internal`.
    public static func entry(_ code: ErrorCode) -> Entry { entries[code] ?? `internal` }
}
