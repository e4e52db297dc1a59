import GatehouseContracts
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import Prometheus
import Synchronization

/// The cap on open connections, in total and per client address (the peer's IP address).
final class ConnectionAdmission: Sendable {
    enum Decision: Equatable {
        case admitted
        /// The gateway has `maxTotal` open connections.
        case refusedTotal
        /// This address has `maxPerAddress` open connections.
        case refusedAddress
    }

    let maxTotal: Int
    /// 0: no per-address cap.
    let maxPerAddress: Int
    private struct Counts {
        var total = 0
        var perAddress: [String: Int] = [:]
    }
    private let counts = Mutex(Counts())

    /// Peers the per-address cap does not apply to: trusted proxies, whose connections carry
    /// many clients.
    let exempt: @Sendable (String) -> Bool

    init(maxTotal: Int, maxPerAddress: Int, exempt: @escaping @Sendable (String) -> Bool = { _ in false }) {
        self.maxTotal = maxTotal
        self.maxPerAddress = maxPerAddress
        self.exempt = exempt
    }

    /// Counts a new connection from `address` (nil: only in the total) when both caps allow it;
    /// call `release` with the same address when it closes.
    func admit(_ address: String?) -> Decision {
        counts.withLock { counts in
            guard counts.total < maxTotal else { return .refusedTotal }
            if maxPerAddress > 0, let address {
                let open = counts.perAddress[address, default: 0]
                guard open < maxPerAddress else { return .refusedAddress }
                counts.perAddress[address] = open + 1
            }
            counts.total += 1
            return .admitted
        }
    }

    /// Forgets an admitted connection.
    func release(_ address: String?) {
        counts.withLock { counts in
            counts.total -= 1
            if maxPerAddress > 0, let address, let open = counts.perAddress[address] {
                counts.perAddress[address] = open > 1 ? open - 1 : nil
            }
        }
    }

    /// Connections open now.
    var open: Int { counts.withLock { $0.total } }

    // MARK: Refused connections

    /// Refused connections still open for their answer to be read; past `maxLingering` a refused
    /// connection is closed right after its answer is written (a flood of refusals must not hold
    /// more descriptors than the caps allow).
    private let lingering = Atomic<Int>(0)
    let maxLingering = 1_024

    func startLinger() -> Bool {
        if lingering.wrappingAdd(1, ordering: .relaxed).newValue <= maxLingering { return true }
        lingering.wrappingSubtract(1, ordering: .relaxed)
        return false
    }

    func endLinger() { lingering.wrappingSubtract(1, ordering: .relaxed) }

    /// Refusals since the last log line, and when that was: one line per 10 s at most.
    private let refusalLog = Mutex<(last: ContinuousClock.Instant?, count: Int)>((nil, 0))

    /// Counts a refusal; the number to log (this one included) when a line is due, else nil.
    func refusalToLog(now: ContinuousClock.Instant = .now) -> Int? {
        refusalLog.withLock { log in
            log.count += 1
            if let last = log.last, now - last < .seconds(10) { return nil }
            defer { log = (now, 0) }
            return log.count
        }
    }
}

/// Counters of the connection layer, in the gateway's registry.
final class ConnectionMetrics: Sendable {
    private let refusedTotal: Counter
    private let refusedAddress: Counter
    private let timeouts: [ConnectionGuard.Phase: Counter]
    private let open: Gauge
    private let registry: PrometheusCollectorRegistry
    private let rejections = Mutex<[String: Counter]>([:])

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        func refused(_ reason: String) -> Counter {
            registry.makeCounter(
                descriptor: .init(
                    namespace: "gatehouse", subsystem: "http", metricName: "connections_refused", unitName: "total",
                    helpText: "Connections closed at accept: the gateway's cap (total) or the client address's cap (per_address) was reached."),
                labels: [("reason", reason)])
        }
        refusedTotal = refused("total")
        refusedAddress = refused("per_address")
        var timeouts: [ConnectionGuard.Phase: Counter] = [:]
        for phase in [ConnectionGuard.Phase.head, .body, .idle] {
            timeouts[phase] = registry.makeCounter(
                descriptor: .init(
                    namespace: "gatehouse", subsystem: "http", metricName: "connection_timeouts", unitName: "total",
                    helpText: "Connections closed for a timeout: reading a request head or body, or idle between requests."),
                labels: [("phase", phase.rawValue)])
        }
        self.timeouts = timeouts
        open = registry.makeGauge(
            descriptor: .init(namespace: "gatehouse", subsystem: "http", metricName: "open_connections", unitName: "", helpText: "HTTP connections open now."))
    }

    func refused(_ decision: ConnectionAdmission.Decision) {
        (decision == .refusedAddress ? refusedAddress : refusedTotal).increment()
    }

    func timedOut(_ phase: ConnectionGuard.Phase) { timeouts[phase]?.increment() }

    func opened() { open.increment() }
    func closed() { open.decrement() }

    /// A request the HTTP layer answered itself (framing, timeout), by code (a fixed set: the table's).
    func rejected(_ code: String) {
        let counter = rejections.withLock { cache in
            if let known = cache[code] { return known }
            let made = registry.makeCounter(
                descriptor: .init(
                    namespace: "gatehouse", subsystem: "http", metricName: "rejected_requests", unitName: "total",
                    helpText: "Requests refused by the HTTP layer itself (bad framing, timeouts), by error code."),
                labels: [("code", code)])
            cache[code] = made
            return made
        }
        counter.increment()
    }
}

/// The gateway's HTTP/1.1 server: Hummingbird's `HTTP1Channel`, behind the connection caps, with
/// a `ConnectionGuard` on every admitted connection.
struct GatewayHTTPChannel: ServerChildChannel {
    struct Connection: ServerChildChannelValue {
        let channel: any Channel
        /// Nil for a refused connection.
        let http: HTTP1Channel.Value?
    }
    typealias Value = Connection

    let http1: HTTP1Channel
    let admission: ConnectionAdmission
    let metrics: ConnectionMetrics
    let logger: Logger

    /// The builder to pass to `Application(server:)`.
    static func builder(
        timeouts: ConnectionTimeouts, admission: ConnectionAdmission, metrics: ConnectionMetrics, logger: Logger
    ) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            let configuration = HTTP1Channel.Configuration(
                additionalChannelHandlers: [ConnectionGuard(timeouts: timeouts, metrics: metrics, logger: logger)])
            return GatewayHTTPChannel(
                http1: HTTP1Channel(responder: responder, configuration: configuration), admission: admission, metrics: metrics,
                logger: logger)
        }
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Connection> {
        // Counted per client (an IPv6 client is its /64); a trusted proxy, which carries many
        // clients, only in the total.
        let address = channel.remoteAddress?.ipAddress.flatMap { admission.exempt($0) ? nil : IPAddress.capKey($0) }
        let decision = admission.admit(address)
        guard decision == .admitted else {
            metrics.refused(decision)
            if let count = admission.refusalToLog() {
                self.logger.notice(
                    "connections refused: a connection cap is reached",
                    metadata: [
                        "reason": .string(decision == .refusedAddress ? "per_address" : "total"),
                        "refused_since_last_line": .stringConvertible(count), "open": .stringConvertible(admission.open),
                    ])
            }
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(RefusedConnectionHandler(admission: admission))
                return Connection(channel: channel, http: nil)
            }
        }
        metrics.opened()
        channel.closeFuture.whenComplete { [admission, metrics] _ in
            admission.release(address)
            metrics.closed()
        }
        return http1.setup(channel: channel, logger: logger).assumeIsolated().flatMapThrowing { http in
            // The request-line watch goes in front of the decoder; the guard tells it where requests end.
            let watch = RequestLineWatch()
            let operations = channel.pipeline.syncOperations
            try operations.addHandler(watch, position: .first)
            try operations.handler(type: ConnectionGuard.self).lineWatch = watch
            return Connection(channel: channel, http: http)
        }.nonisolated()
    }

    func handle(value: Connection, logger: Logger) async {
        guard let http = value.http else { return }
        await http1.handle(value: http, logger: logger)
    }
}

/// The only handler of a refused connection: answers 503 `too_many_connections` at once, closes
/// the output, drops what the client sends until it closes (or a second passes), then closes.
/// When too many refused connections linger already, it closes right after the answer.
final class RefusedConnectionHandler: StartsWhenActive {
    typealias InboundIn = ByteBuffer

    static let response = GatewayError(
        .tooManyConnections, detail: "Too many open connections; close idle ones or try again later."
    ).closingResponseBytes
    private let admission: ConnectionAdmission
    var started = false
    private var lingering = false

    init(admission: ConnectionAdmission) { self.admission = admission }

    func start(_ context: ChannelHandlerContext) {
        guard admission.startLinger() else {
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(NIOAny(Self.response), promise: written)
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            return
        }
        lingering = true
        context.writeAndFlush(NIOAny(Self.response), promise: nil)
        context.close(mode: .output, promise: nil)
        context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) { context.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if lingering {
            lingering = false
            admission.endLinger()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .inputClosed { context.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
