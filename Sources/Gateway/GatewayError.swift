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
    /// Extra members of the body (`ErrorTable.Entry.members`), in order: durations
    /// (`…ExpiresIn`, `…Seconds`) written as numbers, the others as strings.
    public var members: [(String, String)] = []

    /// An error answered with `status` and a problem body with `code` and `detail`.
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
        for (name, value) in members {
            // Durations (`…ExpiresIn`, `…Seconds`) are numbers of seconds; everything else is text.
            if Self.isDuration(name), let seconds = Int(value) { w.int(name, seconds) } else { w.string(name, value) }
        }
        return w.finish()
    }

    /// Whether the problem member `name` is a duration in seconds, written as a JSON number.
    static func isDuration(_ name: String) -> Bool { name.hasSuffix("ExpiresIn") || name.hasSuffix("Seconds") }

    /// Hummingbird's hook: the problem response (see `makeResponse()`).
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

    /// The error for `code` with its status and headers from the error table.
    init(_ code: ErrorCode, detail: String, reasons: [String]? = nil) {
        let entry = ErrorTable.entry(code)
        self.init(entry.status, code: code.rawValue, detail: detail, headers: entry.headers.fields(), reasons: reasons)
    }

    static func malformed(_ detail: String) -> GatewayError { GatewayError(.malformedRequest, detail: detail) }
    static func invalidArgument(_ detail: String) -> GatewayError { GatewayError(.invalidArgument, detail: detail) }
    static let unsupportedMediaType = GatewayError(.unsupportedMediaType, detail: "The request body must be application/json.")
    static func payloadTooLarge(_ limit: Int?) -> GatewayError {
        GatewayError(
            .payloadTooLarge, detail: limit.map { "The request body is larger than \($0) bytes." } ?? "The request body is too large.")
    }
    static let notFound = GatewayError(.notFound, detail: "No such resource.")
    static func methodNotAllowed(_ allow: [HTTPRequest.Method]) -> GatewayError {
        let allowed = allow.map(\.rawValue).sorted().joined(separator: ", ")
        var error = GatewayError(.methodNotAllowed, detail: "Allowed methods: \(allowed).")
        error.headers[.allow] = allowed
        return error
    }
    /// No bearer token at all (RFC 6750 §3.1: no error attribute).
    static let missingToken = GatewayError(.unauthenticated, detail: "A bearer token is required.")
    /// A presented token that cannot be used.
    static func invalidToken(_ code: ErrorCode = .invalidToken, _ detail: String = "The access token is invalid.") -> GatewayError {
        GatewayError(code, detail: detail)
    }
    static let originNotAllowed = GatewayError(.originNotAllowed, detail: "This origin may not call the API.")
    static let serviceUnavailable = GatewayError(.serviceUnavailable, detail: "The service is unavailable; try again.")
    static let `internal` = GatewayError(.internal, detail: "Internal error.")
}

// MARK: Service errors

extension GatewayError {
    /// Maps a service error to its HTTP form through the error table: the status and headers of
    /// its code, the service's message unless the table fixes one, and the public code (transport
    /// failures all read `service_unavailable`; a code the table does not know, `internal`).
    public init(_ rpc: RPCError) {
        let entry = ErrorTable.entry(rpc.code)
        let code = entry.publicCode ?? rpc.code
        let reasons = rpc.code == .weakPassword ? Self.reasons(rpc.details) : nil
        self.init(entry.status, code: code.rawValue, detail: entry.detail ?? rpc.message, headers: entry.headers.fields(rpc.details), reasons: reasons)
        members = entry.members.compactMap { name in rpc.details[name].map { (name, $0) } }
    }

    /// `weak_password` reasons: `details["reasons"]` as a comma-separated list, else the detail values.
    static func reasons(_ details: [String: String]) -> [String] {
        if let list = details["reasons"] {
            return list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        return details.keys.sorted().compactMap { details[$0] }
    }
}
