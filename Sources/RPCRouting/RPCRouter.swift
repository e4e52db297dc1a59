import Logging
import ProtoCodec
import GatehouseContracts
import GatehouseSupport

/// What a handler knows about the call it is serving.
public struct RPCContext: Sendable {
    /// The caller's request id (unique per client connection).
    public var requestID: UInt64
    /// The method's wire name.
    public var method: String
    /// When the caller stops waiting; work past it is wasted.
    public var deadline: ContinuousClock.Instant
    /// The W3C trace the call belongs to: the caller's `traceparent`, or one the server started
    /// for a request that came without. An RPC server also binds it to the handler's task
    /// (`TraceContext.current`), so calls the handler makes carry it on.
    public var trace: TraceParent?
    /// The server's logger; `logger` adds the request id when a handler asks for it.
    public var baseLogger: Logger

    /// A logger carrying the request id (`rpc.id`) and the trace id (`trace_id`). Made on use:
    /// setting metadata costs a copy (and, with some log handlers, formatting), which most
    /// requests never need.
    public var logger: Logger {
        get {
            var logger = baseLogger
            logger[metadataKey: "rpc.id"] = "\(requestID)"
            if let trace { logger[metadataKey: "trace_id"] = .string(trace.traceID) }
            return logger
        }
        set { baseLogger = newValue }
    }

    /// A context with every field given (tests and in-process callers leave most to defaults).
    public init(
        requestID: UInt64 = 0, method: String = "", deadline: ContinuousClock.Instant = .now + .seconds(2),
        trace: TraceParent? = nil, logger: Logger = Logger(label: "gatehouse.rpc")
    ) {
        self.requestID = requestID
        self.method = method
        self.deadline = deadline
        self.trace = trace
        self.baseLogger = logger
    }
}

/// Maps method names to typed handlers. Pure: no sockets. An `RPCServer` feeds it bytes from
/// the network; tests and in-process callers can feed it directly.
public struct RPCRouter: Sendable {
    /// A type-erased handler: request body in, response body out; throws only `RPCError`.
    public typealias RawHandler = @Sendable ([UInt8], RPCContext) async throws -> [UInt8]

    /// A type-erased handler that never suspends: it answers on the thread that calls it.
    public typealias SyncRawHandler = @Sendable ([UInt8], RPCContext) throws -> [UInt8]

    private var handlers: [String: RawHandler] = [:]
    private var syncHandlers: [String: SyncRawHandler] = [:]
    private var callers: [String: Set<ServiceCaller>] = [:]

    /// A router with no methods.
    public init() {}

    /// Registers a typed handler for `method`. A second registration of the same name replaces the first.
    public mutating func register<Req, Res>(
        _ method: RPCMethod<Req, Res>,
        _ handler: @escaping @Sendable (Req, RPCContext) async throws -> Res
    ) {
        let name = method.name
        callers[name] = method.callers
        syncHandlers[name] = nil
        handlers[name] = { body, context in
            let request = try Self.decodeRequest(Req.self, body, method: name)
            let response: Res
            do {
                response = try await handler(request, context)
            } catch {
                throw RPCRouter.wireError(error, method: name, logger: context.logger)
            }
            return try Self.encodeResponse(response, method: name, logger: context.logger)
        }
    }

    /// Registers a handler that does not suspend (no `await`: an in-memory answer or a point
    /// read on the calling thread). An RPC server runs it on its I/O thread as the request
    /// arrives, without a task: no allocation of one, no job to schedule. It is also reachable
    /// through `handler(for:)`, like any other.
    public mutating func registerSync<Req, Res>(
        _ method: RPCMethod<Req, Res>,
        _ handler: @escaping @Sendable (Req, RPCContext) throws -> Res
    ) {
        let name = method.name
        callers[name] = method.callers
        let raw: SyncRawHandler = { body, context in
            let request = try Self.decodeRequest(Req.self, body, method: name)
            let response: Res
            do {
                response = try handler(request, context)
            } catch {
                throw RPCRouter.wireError(error, method: name, logger: context.logger)
            }
            return try Self.encodeResponse(response, method: name, logger: context.logger)
        }
        syncHandlers[name] = raw
        handlers[name] = { body, context in try raw(body, context) }
    }

    /// Whether `caller` may call the method named `method` (its `RPCMethod.callers`). A method
    /// not registered here is allowed: the server answers `unimplemented` for it anyway.
    public func allows(_ caller: ServiceCaller, method: String) -> Bool {
        callers[method]?.contains(caller) ?? true
    }

    static func decodeRequest<Req: Decodable>(_ type: Req.Type, _ body: [UInt8], method: String) throws -> Req {
        do {
            return try ProtobufDecoder().decode(Req.self, from: body)
        } catch {
            throw RPCError(.malformedRequest, "the request body of \(method) does not decode: \(error)")
        }
    }

    /// `logger` is only made when it is needed: a context's logger copies its metadata (and
    /// `StreamLogHandler` formats all of it) each time it is made, which was 2 to 3 % of the token
    /// service's CPU when every reply made one.
    static func encodeResponse<Res: Encodable>(_ response: Res, method: String, logger: @autoclosure () -> Logger) throws -> [UInt8] {
        do {
            return try ProtobufEncoder().encode(response)
        } catch {
            logger().error("response of \(method) does not encode: \(error)")
            throw RPCError(.internal, "internal error")
        }
    }

    /// Merges another router's methods into this one.
    public mutating func merge(_ other: RPCRouter) {
        for name in other.handlers.keys { syncHandlers[name] = nil }
        handlers.merge(other.handlers) { _, new in new }
        syncHandlers.merge(other.syncHandlers) { _, new in new }
    }

    /// The handler for a method name, if one is registered.
    public func handler(for method: String) -> RawHandler? { handlers[method] }

    /// The handler for a method name when it was registered with `registerSync`.
    public func syncHandler(for method: String) -> SyncRawHandler? { syncHandlers[method] }

    /// The registered method names.
    public var methods: [String] { handlers.keys.sorted() }

    /// Converts any error thrown by a handler into its wire form. Unknown errors become
    /// `internal` and their detail is only logged.
    public static func wireError(_ error: any Error, method: String, logger: @autoclosure () -> Logger) -> RPCError {
        switch error {
        case let e as RPCError: return e
        case let e as any RPCErrorConvertible: return e.rpcError
        case is CancellationError: return RPCError(.cancelled, "the call was cancelled")
        default:
            logger().error("\(method) failed: \(String(reflecting: error))")
            return RPCError(.internal, "internal error")
        }
    }
}

/// Anything that can make typed RPC calls: the ZeroMQ client, or an in-process router.
///
/// Both ways of calling throw only `RPCError`, for every failure, including transport failures
/// (`unavailable`, `deadline_exceeded`).
public protocol RPCCaller: Sendable {
    /// Calls `method` with `request`, waiting at most `timeout` (the caller's default when nil):
    /// for a call that starts work of its own, such as the gateway's.
    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res

    /// Calls `method` with `request`, waiting until `deadline` at the latest: for a call made on
    /// behalf of another (a handler calling the next service), which gets what is left of the
    /// first call's budget rather than a fresh one. A deadline that has already passed fails
    /// with `deadline_exceeded` at once: nothing is sent and nothing runs.
    func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res
}

extension RPCCaller {
    /// Calls `method` with the caller's default timeout.
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req) async throws -> Res {
        try await call(method, request, timeout: nil)
    }

    /// Calls `method` as part of serving `context`: with what is left of its deadline, in its
    /// trace (already the task's in a handler an RPC server runs; bound here otherwise).
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, within context: RPCContext) async throws -> Res {
        if let trace = context.trace, trace != TraceContext.current {
            return try await TraceContext.$current.withValue(trace) {
                try await call(method, request, deadline: context.deadline)
            }
        }
        return try await call(method, request, deadline: context.deadline)
    }

    /// Calls `method` with what is left until `deadline` when there is one, else with the
    /// caller's default timeout.
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant?) async throws -> Res {
        if let deadline { return try await call(method, request, deadline: deadline) }
        return try await call(method, request, timeout: nil)
    }
}

extension RPCError {
    /// The failure of a call whose deadline passed before it was sent or started.
    public static func deadlinePassed(_ method: String) -> RPCError {
        RPCError(.deadlineExceeded, "the deadline of \(method) passed before it started")
    }
}

/// Calls a router in the same process, still encoding and decoding every message so the
/// behaviour matches the network path. Used by tests.
public struct LocalCaller: RPCCaller {
    /// The methods it calls.
    public let router: RPCRouter
    /// The budget of a call given none.
    public var defaultTimeout: Duration
    /// The handlers' logger.
    public var logger: Logger

    /// A caller of `router` in this process.
    public init(router: RPCRouter, defaultTimeout: Duration = .seconds(2), logger: Logger = Logger(label: "gatehouse.local")) {
        self.router = router
        self.defaultTimeout = defaultTimeout
        self.logger = logger
    }

    /// Runs the handler with a deadline `timeout` (or `defaultTimeout`) from now.
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res {
        try await call(method, request, deadline: .now + (timeout ?? defaultTimeout))
    }

    /// Runs the handler with `deadline` and the task's trace in its context; a passed deadline
    /// runs nothing (`deadline_exceeded`).
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res {
        guard let handler = router.handler(for: method.name) else {
            throw RPCError(.unimplemented, "no method named \(method.name)")
        }
        let body: [UInt8]
        do { body = try ProtobufEncoder().encode(request) } catch {
            throw RPCError(.invalidArgument, "the request does not encode: \(error)")
        }
        guard ContinuousClock.now < deadline else { throw RPCError.deadlinePassed(method.name) }
        let context = RPCContext(method: method.name, deadline: deadline, trace: TraceContext.current, logger: logger)
        let reply = try await handler(body, context)
        do { return try ProtobufDecoder().decode(Res.self, from: reply) } catch {
            throw RPCError(.internal, "the reply of \(method.name) does not decode: \(error)")
        }
    }
}
