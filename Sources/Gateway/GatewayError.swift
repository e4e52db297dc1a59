import Foundation
public import GatehouseContracts
public import HTTPTypes
public import Hummingbird
import GatehouseSupport

/// An error the gateway answers with an RFC 9457 `application/problem+json` body:
/// `{type, title, status, code, detail}` (+ `reasons` for `weak_password`).
///
/// `type` is `https://gatehouse.dev/errors/<code>`; `code` is the stable code from the services
/// or from the gateway itself. See `GatewayError.init(_ rpc:)` for the code → status mapping.
public struct GatewayError: Error, HTTPResponseError, Sendable {
    /// HTTP status.
    public var status: HTTPResponse.Status
    /// Stable snake_case code.
    public var code: String
    /// A message safe for clients.
    public var detail: String
    /// Extra response headers (`WWW-Authenticate`, `Allow`, `Retry-After`).
    public var headers: HTTPFields
    /// Reasons behind `weak_password`.
    public var reasons: [String]?

    public init(_ status: HTTPResponse.Status, code: String, detail: String, headers: HTTPFields = [:], reasons: [String]? = nil) {
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers
        self.reasons = reasons
    }

    /// The problem `type` URI for a code.
    public static func typeURI(_ code: String) -> String { "https://gatehouse.dev/errors/\(code)" }

    /// The JSON body.
    var body: [UInt8] {
        var w = JSONObjectWriter()
        w.string("type", Self.typeURI(code))
        w.string("title", status.reasonPhrase)
        w.int("status", status.code)
        w.string("code", code)
        w.string("detail", detail)
        if let reasons { w.strings("reasons", reasons) }
        return w.finish()
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        makeResponse()
    }

    /// The problem response: status, `application/problem+json` body, extra headers, `no-store`.
    func makeResponse() -> Response {
        var fields = headers
        fields[.contentType] = "application/problem+json"
        fields[.cacheControl] = "no-store"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

// MARK: Gateway-made errors

extension GatewayError {
    static let realm = #"Bearer realm="gatehouse""#

    static func malformed(_ detail: String) -> GatewayError {
        GatewayError(.badRequest, code: "malformed_request", detail: detail)
    }
    static func invalidArgument(_ detail: String) -> GatewayError {
        GatewayError(.unprocessableContent, code: "invalid_argument", detail: detail)
    }
    static let unsupportedMediaType = GatewayError(
        .unsupportedMediaType, code: "unsupported_media_type", detail: "The request body must be application/json.")
    static func payloadTooLarge(_ limit: Int) -> GatewayError {
        GatewayError(.contentTooLarge, code: "payload_too_large", detail: "The request body is larger than \(limit) bytes.")
    }
    static let notFound = GatewayError(.notFound, code: "not_found", detail: "No such resource.")
    static func methodNotAllowed(_ allow: [HTTPRequest.Method]) -> GatewayError {
        let allowed = allow.map(\.rawValue).sorted().joined(separator: ", ")
        return GatewayError(
            .methodNotAllowed, code: "method_not_allowed", detail: "Allowed methods: \(allowed).", headers: [.allow: allowed])
    }
    /// No bearer token at all (RFC 6750 §3.1: no error attribute).
    static let missingToken = GatewayError(
        .unauthorized, code: "unauthenticated", detail: "A bearer token is required.", headers: [.wwwAuthenticate: realm])
    /// A presented token that cannot be used.
    static func invalidToken(_ code: String = "invalid_token", _ detail: String = "The access token is invalid.") -> GatewayError {
        GatewayError(
            .unauthorized, code: code, detail: detail,
            headers: [.wwwAuthenticate: #"\#(realm), error="invalid_token""#])
    }
    static let originNotAllowed = GatewayError(.forbidden, code: "origin_not_allowed", detail: "This origin may not call the API.")
    static let serviceUnavailable = GatewayError(
        .serviceUnavailable, code: "service_unavailable", detail: "The service is unavailable; try again.",
        headers: [.retryAfter: "1"])
    static let `internal` = GatewayError(.internalServerError, code: "internal", detail: "Internal error.")
}

// MARK: Service errors

extension GatewayError {
    /// Maps a service error to its HTTP form.
    ///
    /// | code | status |
    /// |---|---|
    /// | `malformed_request` | 400 |
    /// | `invalid_argument`, `invalid_email`, `weak_password` (+ `reasons`) | 422 |
    /// | `invalid_credentials` | 401, `WWW-Authenticate: Bearer realm="gatehouse"`, fixed detail |
    /// | `invalid_token`, `token_expired`, `invalid_refresh_token`, `refresh_token_reused`, `session_expired`, `session_revoked` | 401, `… error="invalid_token"` |
    /// | `user_disabled` | 403 |
    /// | `user_not_found` | 404 |
    /// | `email_exists`, `version_conflict` | 409 |
    /// | `rate_limited` | 429, `Retry-After` |
    /// | `overloaded` | 503 `overloaded`, `Retry-After` |
    /// | `unavailable`, `deadline_exceeded`, `cancelled` | 503 `service_unavailable`, `Retry-After` |
    /// | `internal` and any other code | 500 `internal`, generic detail |
    public init(_ rpc: RPCError) {
        let code = rpc.code.rawValue
        switch code {
        case "malformed_request":
            self.init(.badRequest, code: code, detail: rpc.message)
        case "invalid_argument", "invalid_email":
            self.init(.unprocessableContent, code: code, detail: rpc.message)
        case "weak_password":
            self.init(.unprocessableContent, code: code, detail: rpc.message, reasons: Self.reasons(rpc.details))
        case "invalid_credentials":
            // Same body for an unknown email and a wrong password: never echo the service's text.
            self.init(
                .unauthorized, code: code, detail: "The email or password is incorrect.",
                headers: [.wwwAuthenticate: Self.realm])
        case "invalid_token", "token_expired", "invalid_refresh_token", "refresh_token_reused", "session_expired",
            "session_revoked":
            self = .invalidToken(code, rpc.message)
        case "user_disabled":
            self.init(.forbidden, code: code, detail: rpc.message)
        case "user_not_found":
            self.init(.notFound, code: code, detail: rpc.message)
        case "email_exists", "version_conflict":
            self.init(.conflict, code: code, detail: rpc.message)
        case "rate_limited":
            self.init(.tooManyRequests, code: code, detail: rpc.message, headers: [.retryAfter: "1"])
        case "overloaded":
            self.init(.serviceUnavailable, code: code, detail: "The service is busy; try again.", headers: [.retryAfter: "1"])
        case "unavailable", "deadline_exceeded", "cancelled":
            self = .serviceUnavailable
        default:
            self = .internal
        }
    }

    /// `weak_password` reasons: `details["reasons"]` as a comma-separated list, else the detail values.
    static func reasons(_ details: [String: String]) -> [String] {
        if let list = details["reasons"] {
            return list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        return details.keys.sorted().compactMap { details[$0] }
    }
}
