import Foundation
import GatehouseContracts
import Logging
import ProtoCodec
import ServiceLifecycle
import Synchronization
import ZeroMQ
import RPCRouting

/// Serves an `RPCRouter` on a ROUTER socket: binds `tcp://`, `ipc://` or `inproc://` endpoints,
/// runs requests concurrently as tasks (at most `maxInFlight` at once; more are answered
/// `overloaded` at once), answers `deadline_exceeded` without running the handler when a
/// request's deadline passed before it started, and shuts down gracefully.
///
/// Shutdown answers every request the server accepted, so no caller waits for its deadline:
/// requests arriving once shutdown has begun are answered `unavailable` at once; those in
/// flight get their reply if their handler finishes within `drainTimeout`, and `unavailable`
/// when it does not (their tasks are cancelled; one not started yet never runs). Then the
/// socket closes, and any handler still running finishes on the global executor, its reply
/// dropped.
///
/// Malformed traffic never stops the server: an envelope that does not decode gets a
/// `malformed_request` reply when its request id can be read, and is otherwise dropped with a
/// log line. An unknown method gets `unimplemented`; another protocol version gets
/// `unsupported_version`.
public final class RPCServer: Service, Sendable {
    /// Server settings.
    public struct Configuration: Sendable {
        /// Endpoints to bind (`tcp://127.0.0.1:7001`, `tcp://127.0.0.1:0` for any free port, `inproc://identity`).
        public var endpoints: [String]
        /// Requests handled at once; past this, `overloaded`.
        public var maxInFlight: Int = 1024
        /// Largest request accepted (bytes); a larger one drops the connection.
        public var maxMessageSize: Int64 = 16 << 20
        /// Deadline for a request that names none.
        public var defaultTimeout: Duration = .seconds(30)
        /// How long a graceful shutdown waits for in-flight requests; those still running then
        /// are answered `unavailable`.
        public var drainTimeout: Duration = .seconds(10)
        /// CURVE server keys; nil serves plain text.
        public var curve: CurveServerKeys?
        /// Where handlers run. `.ioThread` (the default) starts each handler on the server's
        /// own I/O thread, so a handler that does not suspend answers without any thread hop;
        /// handlers must then hand blocking or long CPU work to their own threads (the stores and
        /// the hash pool do). `.globalPool` runs them on Swift's cooperative pool.
        public var handlerExecutor: HandlerExecutor = .ioThread
        /// With CURVE: the role of each client key, so each method is served only to the roles
        /// its `RPCMethod.callers` names (others get `permission_denied`). Nil: every client the
        /// ZAP allow list admits may call every method.
        public var callerRoles: CallerRoles?

        /// Settings binding `endpoints`, with the defaults for the rest.
        public init(endpoints: [String]) {
            self.endpoints = endpoints
        }
    }

    /// Where request handlers run.
    public enum HandlerExecutor: Sendable {
        case ioThread
        case globalPool
    }

    enum Command: CarriesJobs {
        /// A handler's reply to the request in `slot` (see `PendingRequests`).
        case reply(slot: Int, header: [UInt8], body: [UInt8])
        case job(UnownedJob)
        case stop
    }

    /// Runs handler tasks on the server's I/O thread (a handler still running at shutdown goes
    /// to the global executor).
    typealias LoopExecutor = IOLoopExecutor<Command>

    final class Core: Sendable {
        let router: RPCRouter
        let configuration: Configuration
        let logger: Logger
        let io: IOThread<Command>
        let inFlight = Atomic<Int>(0)
        let stopping = Atomic<Bool>(false)
        /// Set as the loop gives up the requests still in flight: a handler task that has not
        /// started by then never runs (its caller has been answered `unavailable`).
        let closed = Atomic<Bool>(false)
        let executor: LoopExecutor
        /// Whether the logger writes debug lines: then each handled request gets one.
        let logsRequests: Bool

        init(router: RPCRouter, configuration: Configuration, logger: Logger) throws {
            self.router = router
            self.configuration = configuration
            self.logger = logger
            self.logsRequests = logger.logLevel <= .debug
            let io = try IOThread<Command>()
            self.io = io
            self.executor = LoopExecutor(io: io)
        }

        /// The debug line of a handled request: its method, outcome and time since it was read,
        /// with `rpc.id` and `trace_id` (never the request's content).
        func logHandled(_ context: RPCContext, error: RPCError?, received: ContinuousClock.Instant) {
            let millis = ((ContinuousClock.now - received) / .microseconds(10)).rounded() / 100
            context.logger.debug("rpc \(context.method) \(error.map { $0.code.rawValue } ?? "ok") in \(millis) ms")
        }

        /// A handler task finished.
        func finished() {
            let left = inFlight.subtract(1, ordering: .acquiringAndReleasing).newValue
            if left == 0 && stopping.load(ordering: .acquiring) { io.signal.signal() }
        }
    }

    let core: Core
    private let context: ZMQContext
    private let started = Mutex<[String]?>(nil)

    /// A server for `router`; nothing is bound until `start()`.
    public init(router: RPCRouter, configuration: Configuration, context: ZMQContext = .shared, logger: Logger = Logger(label: "gatehouse.rpc.server")) throws {
        self.core = try Core(router: router, configuration: configuration, logger: logger)
        self.context = context
    }

    /// Requests being handled now.
    public var inFlight: Int { core.inFlight.load(ordering: .relaxed) }

    /// Binds the endpoints and starts serving; returns the bound endpoints with wildcard ports
    /// resolved. Idempotent. `run()` calls it if you have not.
    @discardableResult
    public func start() throws -> [String] {
        try started.withLock { started in
            if let started { return started }
            let socket = try context.socket(.router)
            try socket.set([
                .linger(1000), .maxMessageSize(core.configuration.maxMessageSize),
                .sendHighWaterMark(100_000), .receiveHighWaterMark(100_000),
            ])
            let zapDomain = try socket.configureCurveServer(core.configuration.curve, logger: core.logger)
            let bound: [String]
            do { bound = try socket.bind(all: core.configuration.endpoints) } catch {
                socket.releaseZAPDomain(zapDomain)
                throw error
            }
            let loop = ServerLoop(core: core, socket: socket, zapDomain: zapDomain)
            core.io.start(name: IOThread<Command>.threadName("rpcs", endpoint: core.configuration.endpoints.first ?? "")) { loop.run() }
            started = bound
            return bound
        }
    }

    /// Serves until graceful shutdown or cancellation, then drains and returns.
    public func run() async throws {
        try start()
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await core.io.join()
            } onCancel: {
                self.stop()
            }
        } onGracefulShutdown: {
            self.stop()
        }
    }

    /// Asks the server to stop reading, finish in-flight requests and close.
    public func stop() {
        core.stopping.store(true, ordering: .releasing)
        core.io.submit(.stop)
    }

    /// Waits until the server's socket is closed.
    public func waitUntilStopped() async {
        await core.io.join()
    }
}

/// CURVE keys for a server: its key pair, and the client public keys it accepts (nil: any
/// client that knows the server key). With an allow list, the socket is registered with its
/// context's `ZAPHandler` under a domain of its own, `zapDomain/N`; the server's own public key
/// is always allowed too.
public struct CurveServerKeys: Sendable, Hashable {
    /// The server's CURVE public key (32 bytes).
    public var publicKey: [UInt8]
    /// The server's CURVE secret key (32 bytes; never logged).
    public var secretKey: [UInt8]
    /// Client public keys allowed to connect; nil allows any client that knows the server key.
    public var allowedClientKeys: Set<[UInt8]>?
    /// The prefix of the ZAP domain the allow list is registered under (`zapDomain/N`).
    public var zapDomain: String

    /// Server keys with an optional allow list.
    public init(publicKey: [UInt8], secretKey: [UInt8], allowedClientKeys: Set<[UInt8]>? = nil, zapDomain: String = "gatehouse") {
        self.publicKey = publicKey
        self.secretKey = secretKey
        self.allowedClientKeys = allowedClientKeys
        self.zapDomain = zapDomain
    }
}

/// The role each client key of a CURVE server plays, keyed by the ZAP user id (the key in Z85).
public struct CallerRoles: Sendable {
    /// Roles of the keys named here.
    public var roles: [String: ServiceCaller]
    /// The role of every other key the allow list admits.
    public var otherKeys: ServiceCaller
    /// The server's own key, in Z85: its operator's tools (`gatehouse healthcheck`) may call
    /// every method.
    public var ownKey: String

    /// Roles for `roles`, `otherKeys` for the rest, everything for `ownKey`.
    public init(roles: [String: ServiceCaller], otherKeys: ServiceCaller, ownKey: String) {
        self.roles = roles
        self.otherKeys = otherKeys
        self.ownKey = ownKey
    }

    /// Whether the client with ZAP user id `userID` may call `method` of `router`. A connection
    /// without a user id (not admitted by the allow list) may call nothing.
    public func permits(_ userID: String?, method: String, router: RPCRouter) -> Bool {
        guard let userID, !userID.isEmpty else { return false }
        if userID == ownKey { return true }
        return router.allows(roles[userID] ?? otherKeys, method: method)
    }
}
