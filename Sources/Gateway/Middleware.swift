import Foundation
import Synchronization
import GatehouseContracts
import GatehouseSupport
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

extension HTTPField.Name {
    static let xRequestID = Self("X-Request-Id")!
    static let xForwardedFor = Self("X-Forwarded-For")!
    // `.traceparent` comes with HTTPTypes.
}

/// Outermost middleware: request id and W3C trace context in and out, one access-log line,
/// request metrics, and the last-resort conversion of any error into a problem response.
///
/// The trace is the caller's `traceparent` when it is valid (`TraceParent`, strictly), else a
/// new one. It is bound to the request's task (`TraceContext.current`) for everything the
/// request does: the RPC clients send it with every call, and log lines carry its trace id
/// (`trace_id=`, added by the log handler only when a line is written). The response echoes it.
struct EdgeMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let metrics: GatewayMetrics
    let routes: RouteTable

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let received = request.headers[.traceparent]
        if let received, let trace = TraceParent(received) {
            return try await TraceContext.$current.withValue(trace) {
                try await handle(request, context: context, traceparent: received, next: next)
            }
        }
        let trace = TraceParent.random()
        return try await TraceContext.$current.withValue(trace) {
            try await handle(request, context: context, traceparent: trace.description, next: next)
        }
    }

    private func handle(
        _ request: Request, context: Context, traceparent: String, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        var context = context
        let requestID = RequestIDs.accept(request.headers[.xRequestID]) ?? RequestIDs.generate()
        context.requestID = requestID
        context.logger[metadataKey: "request_id"] = .string(requestID)
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            response = routes.render(error, request: request, context: context)
        }
        response.headers[.xRequestID] = requestID
        response.headers[.traceparent] = traceparent
        let duration = ContinuousClock.now - start
        let route = context.endpointPath.map { $0 == "NotFound" ? "unmatched" : $0 } ?? "unmatched"
        metrics.recordRequest(route: route, method: Self.metricMethod(request.method), status: response.status.code, duration: duration)
        context.logger.info(
            "request",
            metadata: [
                "method": .string(request.method.rawValue),
                "path": .string(request.uri.path),
                "status": .stringConvertible(response.status.code),
                "duration_ms": .string(String(format: "%.2f", duration.seconds * 1000)),
            ])
        return response
    }

    /// The method as a metric label: the standard ones by name, anything else `other` (a client
    /// inventing methods must not grow the label set without bound).
    static func metricMethod(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .head, .post, .put, .patch, .delete, .options, .trace, .connect: method.rawValue
        default: "other"
        }
    }
}

/// CORS for browser apps: origins in `allowedOrigins` (exact match, or `*`) may call the API.
/// Preflights from them get 204 with the allowed methods and headers; preflights from others get
/// 403 `origin_not_allowed`. Responses to other origins carry no CORS headers.
struct CORSMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let allowedOrigins: Set<String>
    let routes: RouteTable

    static let allowMethods = "GET, POST, PATCH, DELETE"
    static let allowHeaders = "Authorization, Content-Type, X-Request-Id, traceparent, Last-Event-ID"
    static let exposeHeaders = "X-Request-Id, traceparent, WWW-Authenticate, Retry-After, Allow"

    func isAllowed(_ origin: String) -> Bool {
        allowedOrigins.contains(origin) || allowedOrigins.contains("*")
    }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let origin = request.headers[.origin] else {
            return try await respond(request, context, next)
        }
        let allowed = isAllowed(origin)
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            guard allowed else { throw GatewayError.originNotAllowed }
            return Response(
                status: .noContent,
                headers: [
                    .accessControlAllowOrigin: origin,
                    .accessControlAllowMethods: Self.allowMethods,
                    .accessControlAllowHeaders: Self.allowHeaders,
                    .accessControlMaxAge: "600",
                    .vary: "Origin",
                ])
        }
        var response = try await respond(request, context, next)
        if allowed {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.accessControlExposeHeaders] = Self.exposeHeaders
            response.headers.append(HTTPField(name: .vary, value: "Origin"))
        }
        return response
    }

    /// Runs the route and renders errors here, so error responses get CORS headers too.
    private func respond(
        _ request: Request, _ context: Context, _ next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return routes.render(error, request: request, context: context)
        }
    }
}

/// Request ids: a caller's `X-Request-Id` is kept when it is 1…128 characters of
/// `[A-Za-z0-9._:-]`; otherwise a new random one is made.
enum RequestIDs {
    static func accept(_ value: String?) -> String? {
        guard let value, !value.isEmpty, value.utf8.count <= 128 else { return nil }
        let ok = value.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x5F
                || b == 0x3A || b == 0x2D
        }
        return ok ? value : nil
    }

    /// 64 random bits drawn once per process, then a counter: unique ids without a system call
    /// per request (asking the kernel for each of 32 random hex digits cost ~25 µs a request).
    /// Request ids correlate log lines; they are not secrets.
    private static let prefix = UInt64.random(in: .min ... .max)
    private static let counter = Atomic<UInt64>(0)

    /// 32 lowercase hex digits: the process prefix, then the counter.
    static func generate() -> String {
        let n = counter.wrappingAdd(1, ordering: .relaxed).newValue
        return String(unsafeUninitializedCapacity: 32) { buffer in
            let hex: StaticString = "0123456789abcdef"
            let digits = hex.utf8Start
            for i in 0..<16 {
                buffer[i] = digits[Int((prefix >> UInt64(60 - 4 * i)) & 0xF)]
                buffer[16 + i] = digits[Int((n >> UInt64(60 - 4 * i)) & 0xF)]
            }
            return 32
        }
    }
}

/// The routes the gateway serves (path → methods), used for 405 answers and the OpenAPI check.
struct RouteTable: Sendable {
    private(set) var methodsByPath: [String: [HTTPRequest.Method]] = [:]
    let logger: Logger

    init(logger: Logger) { self.logger = logger }

    mutating func add(_ method: HTTPRequest.Method, _ path: String) {
        methodsByPath[Self.normalize(path), default: []].append(method)
    }

    /// Every (method, path) pair.
    var all: [(method: HTTPRequest.Method, path: String)] {
        methodsByPath.flatMap { path, methods in methods.map { (method: $0, path: path) } }
    }

    static func normalize(_ path: String) -> String {
        "/" + path.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
    }

    /// Any error as a problem response. Unknown errors are logged and become a generic 500.
    func render(_ error: any Error, request: Request, context: GatewayRequestContext) -> Response {
        let problem: GatewayError
        switch error {
        case let e as GatewayError:
            problem = e
        case let e as RPCError:
            problem = GatewayError(e)
            if problem.status == .internalServerError {
                context.logger.error("backend error", metadata: ["error": .string(e.description)])
            }
        case let e as HTTPError where e.status == .notFound:
            if let methods = methodsByPath[Self.normalize(request.uri.path)], !methods.contains(request.method) {
                problem = .methodNotAllowed(methods)
            } else {
                problem = .notFound
            }
        case is NIOTooManyBytesError:
            problem = .payloadTooLarge(nil)
        case let e as HTTPLayerError:
            problem = e.problem  // the connection handler answers it (a body cut short, a timeout)
        case let e as any HTTPResponseError:
            problem = tableError(e, request: request)
        case is CancellationError:
            problem = .serviceUnavailable
        default:
            context.logger.error("unexpected error", metadata: ["error": .string(String(reflecting: error))])
            problem = .internal
        }
        return problem.makeResponse()
    }

    /// Hummingbird's own errors (a bad query or parameter, a body limit) as the table's row for
    /// their status, so no answer escapes the table: 4xx statuses the table lacks read
    /// `malformed_request`, 5xx `internal`.
    func tableError(_ error: any HTTPResponseError, request: Request) -> GatewayError {
        let code: ErrorCode
        switch error.status {
        case .badRequest: code = .malformedRequest
        case .notFound: code = .notFound
        case .methodNotAllowed:
            return .methodNotAllowed(methodsByPath[Self.normalize(request.uri.path)] ?? [])
        case .requestTimeout: code = .requestTimeout
        case .contentTooLarge: return .payloadTooLarge(nil)
        case .unsupportedMediaType: code = .unsupportedMediaType
        case .requestHeaderFieldsTooLarge: code = .headerFieldsTooLarge
        case .tooManyRequests: code = .rateLimited
        case .serviceUnavailable: code = .serviceUnavailable
        default: code = error.status.code < 500 ? .malformedRequest : .internal
        }
        if code == .internal { return .internal }
        let detail = (error as? HTTPError)?.body ?? ErrorTable.entry(code).detail ?? error.status.reasonPhrase
        return GatewayError(code, detail: detail)
    }
}
