import Foundation
import GatehouseContracts
import GatehouseSupport
import Logging
import ProtoCodec
import Synchronization
import ZeroMQ
import RPCRouting

/// Calls a service over ZeroMQ: one DEALER socket on its own I/O thread carries many calls in
/// flight, replies are matched by request id, and every call has a deadline.
///
/// - Calls that time out or cannot be delivered fail with `deadline_exceeded` / `unavailable`.
/// - Only methods marked `idempotent` are retried (within the same overall deadline).
/// - A restarted server is found again on its own: the socket reconnects in the background.
/// - Cancelling the calling task fails the call with `cancelled` at once.
public final class RPCClient: RPCCaller, Sendable {
    /// Client settings.
    public struct Configuration: Sendable {
        /// The service's endpoint (`tcp://127.0.0.1:7001`, `inproc://identity`).
        public var endpoint: String
        /// Deadline of a call that names none.
        public var defaultTimeout: Duration = .seconds(2)
        /// Attempts for an idempotent call (1 = no retry).
        public var idempotentAttempts: Int = 3
        /// Largest reply accepted (bytes); a larger one drops the connection.
        public var maxMessageSize: Int64 = 16 << 20
        /// Outgoing queue bound per connection (messages).
        public var sendHighWaterMark: Int = 100_000
        /// CURVE keys: this client's key pair and the server's public key. Nil: plain text.
        public var curve: CurveClientKeys?
        /// Calls sent on a connection that drops fail at once with `unavailable` instead of
        /// waiting for the server to come back (set by `BalancedRPCClient` on its members).
        public var failFastOnDisconnect = false
        /// ZMTP heartbeats (milliseconds): a connection whose server stops answering them (a host
        /// powered off or cut off, where no TCP reset comes) is dropped after `heartbeatTimeout`,
        /// and counts as lost. 0: none (set by `BalancedRPCClient` on its members).
        public var heartbeatInterval = 0
        /// See `heartbeatInterval`.
        public var heartbeatTimeout = 0

        /// Settings reaching `endpoint`, with `defaultTimeout` for calls given none.
        public init(endpoint: String, defaultTimeout: Duration = .seconds(2)) {
            self.endpoint = endpoint
            self.defaultTimeout = defaultTimeout
        }
    }

    enum Command: CarriesJobs {
        /// Look at the socket and the deadlines (a caller queued a request, saw a reply
        /// waiting, or started a call with an earlier deadline).
        case wake
        case stop
        /// A task job to run on the I/O thread (`executor`).
        case job(UnownedJob)
    }

    /// Runs tasks on the client's I/O thread (see `RPCClient.executor`).
    typealias LoopExecutor = IOLoopExecutor<Command>

    /// What the client and its I/O thread share. The thread holds this, not the client, so
    /// dropping the last reference to the client stops the thread.
    final class Core: Sendable {
        let configuration: Configuration
        let logger: Logger
        let io: IOThread<Command>
        let socket: ClientSocket
        let nextID = Atomic<UInt64>(1)
        let executor: LoopExecutor

        /// Takes the connected DEALER; `tracksConnection`: see `ClientSocket`.
        init(configuration: Configuration, logger: Logger, socket: sending Socket, tracksConnection: Bool) throws {
            self.configuration = configuration
            self.logger = logger
            let io = try IOThread<Command>()
            self.io = io
            self.executor = LoopExecutor(io: io)
            self.socket = try ClientSocket(
                socket, endpoint: configuration.endpoint, tracksConnection: tracksConnection,
                failFastOnDisconnect: configuration.failFastOnDisconnect)
        }

        /// Completes call `id` with an error, if it is still waiting.
        func fail(_ id: UInt64, _ error: RPCError) {
            if let continuation = socket.withLock({ $0.remove(id) }) {
                continuation.resume(throwing: error)
            }
        }
    }

    let core: Core
    /// The settings this client was made with.
    public var configuration: Configuration { core.configuration }
    var logger: Logger { core.logger }
    var io: IOThread<Command> { core.io }

    /// An executor that runs tasks on this client's I/O thread. A caller running there
    /// (`withTaskExecutorPreference(client.executor) { ... }`) sends its request and is resumed
    /// by its reply on that same thread, in the wake-up that received the reply: a call then
    /// crosses two threads (to the server and back), as a bare libzmq request does, where a
    /// caller on the cooperative pool crosses three (the reply is received on the I/O thread,
    /// which then wakes a pool thread). Code run there must not block or compute for long: it
    /// holds up every reply of this client. After `close()`, jobs run on the global executor.
    public var executor: any TaskExecutor { core.executor }

    /// Connects to `configuration.endpoint` (in the background) and starts the I/O thread.
    /// `context` nil: `ZMQContext.forConnecting(to:)`, so a slow name lookup for this endpoint
    /// holds up no other socket.
    public init(configuration: Configuration, context: ZMQContext? = nil, logger: Logger = Logger(label: "gatehouse.rpc.client")) throws {
        let context = context ?? .forConnecting(to: configuration.endpoint)
        // Make the socket here so configuration errors surface to the caller, then move it
        // into the core's `ClientSocket`, the only way to reach it from then on.
        let socket = try context.socket(.dealer)
        // Over tcp and ipc, a monitor tells when a connection is up, and requests wait for one
        // in the client's outbox (see `ClientSocket`); `ZMQ_IMMEDIATE` would do that too, but
        // it discards replies not read yet when a connection drops. inproc has no connections
        // to lose (and no monitor events): there `ZMQ_IMMEDIATE` keeps requests until a
        // server binds.
        let tracksConnection = !configuration.endpoint.hasPrefix("inproc://")
        try socket.set([
            .linger(0), .immediate(!tracksConnection), .reconnectInterval(100), .reconnectIntervalMax(1000),
            .maxMessageSize(configuration.maxMessageSize), .sendHighWaterMark(configuration.sendHighWaterMark),
            .receiveHighWaterMark(configuration.sendHighWaterMark),
        ])
        if configuration.heartbeatInterval > 0 {
            try socket.set([.heartbeatInterval(configuration.heartbeatInterval), .heartbeatTimeout(configuration.heartbeatTimeout)])
        }
        try socket.configureCurveClient(configuration.curve)
        var monitor: Socket?
        if tracksConnection {
            let endpoint = "inproc://gatehouse-rpc-client-\(Self.monitors.wrappingAdd(1, ordering: .relaxed).oldValue)-\(UInt32.random(in: 0...UInt32.max))"
            try socket.monitor(endpoint, events: [.handshakeSucceeded, .disconnected])
            let events = try context.socket(.pair)
            try events.connect(endpoint)
            monitor = events
        }
        try socket.connect(configuration.endpoint)
        self.core = try Core(configuration: configuration, logger: logger, socket: socket, tracksConnection: tracksConnection)
        let loop = try ClientLoop(client: core, monitor: monitor)
        io.start(name: IOThread<Command>.threadName("rpcc", endpoint: configuration.endpoint)) { loop.run() }
    }

    /// Whether a connection to the server is up (always true over inproc): requests made now
    /// go out at once.
    public var isConnected: Bool { core.socket.withLock { $0.isConnected } }

    /// Numbers the clients' monitor endpoints (inproc names are per context).
    private static let monitors = Atomic<UInt64>(0)

    deinit {
        io.submit(.stop)
    }

    /// Stops the I/O thread; calls still waiting fail with `unavailable`.
    public func close() async {
        io.submit(.stop)
        await io.join()
    }

    /// Calls with a deadline `timeout` (or the configuration's `defaultTimeout`) from now.
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, timeout: Duration?) async throws -> Res {
        try await call(method, request, deadline: .now + (timeout ?? configuration.defaultTimeout))
    }

    /// The request carries what is left until `deadline` (`timeout_ms`), so the server and any
    /// service it calls in turn stop where this caller does. Past `deadline`, nothing is sent.
    public func call<Req, Res>(_ method: RPCMethod<Req, Res>, _ request: Req, deadline: ContinuousClock.Instant) async throws -> Res {
        let body: [UInt8]
        do { body = try ProtobufEncoder().encode(request) } catch {
            throw RPCError(.invalidArgument, "the request of \(method.name) does not encode: \(error)")
        }
        let attempts = method.idempotent ? max(1, configuration.idempotentAttempts) : 1
        // The caller's trace travels in the header (W3C traceparent), written without a string.
        let trace = TraceContext.current
        var attempt = 1
        while true {
            let now = ContinuousClock.now
            let remaining = now.duration(to: deadline)
            // A spent budget starts nothing (a retry's included): the answer could only come too late.
            guard remaining > .zero else { throw RPCError.deadlinePassed(method.name) }
            let share = attempt < attempts ? remaining / (attempts - attempt + 1) : remaining
            do {
                let reply = try await send(method: method.name, body: body, trace: trace, deadline: now + share, timeout: share)
                do { return try ProtobufDecoder().decode(Res.self, from: reply) } catch {
                    logger.error("reply of \(method.name) does not decode: \(error)")
                    throw RPCError(.internal, "the reply of \(method.name) does not decode")
                }
            } catch let error as RPCError
                where attempt < attempts && (error.code == .deadlineExceeded || error.code == .unavailable)
            {
                attempt += 1
                logger.debug("retrying idempotent \(method.name) after \(error.code) (attempt \(attempt) of \(attempts))")
            }
        }
    }

    /// Sends one attempt and waits for its reply body. The request goes out from the calling
    /// thread when the socket takes it without waiting; the I/O thread is woken only when it
    /// has something to do (a queued request, a waiting reply, an earlier deadline).
    func send(
        method: String, body: [UInt8], trace: TraceParent?, deadline: ContinuousClock.Instant, timeout: Duration
    ) async throws -> [UInt8] {
        let id = core.nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        let ms = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        let header = RequestHeader(
            version: rpcProtocolVersion, requestID: id, method: method,
            timeoutMs: UInt32(clamping: max(1, ms)), traceParent: "")
        let core = self.core
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<[UInt8], any Error>) in
                let outcome = core.socket.withLock { channel in
                    channel.start(id: id, header: header, trace: trace, body: body, deadline: deadline, continuation: continuation)
                }
                switch outcome {
                case .closed:
                    continuation.resume(throwing: RPCError(.unavailable, "the client for \(core.configuration.endpoint) is closed"))
                    return
                case .started(let wakeIOThread):
                    if wakeIOThread { core.io.submit(.wake) }
                }
                // Registered first, checked second: a cancellation in between is seen by one
                // of this check and the cancellation handler.
                if Task.isCancelled {
                    core.fail(id, RPCError(.cancelled, "the call was cancelled"))
                }
            }
        } onCancel: {
            core.fail(id, RPCError(.cancelled, "the call was cancelled"))
        }
    }

    func fail(_ id: UInt64, _ error: RPCError) { core.fail(id, error) }
}

/// CURVE keys for a client: its own key pair and the server's public key (32 bytes each).
public struct CurveClientKeys: Sendable, Hashable {
    /// This client's CURVE public key (32 bytes).
    public var publicKey: [UInt8]
    /// This client's CURVE secret key (32 bytes; never logged).
    public var secretKey: [UInt8]
    /// The server's CURVE public key, which the client checks.
    public var serverPublicKey: [UInt8]

    /// Client keys for a server with this public key.
    public init(publicKey: [UInt8], secretKey: [UInt8], serverPublicKey: [UInt8]) {
        self.publicKey = publicKey
        self.secretKey = secretKey
        self.serverPublicKey = serverPublicKey
    }
}
