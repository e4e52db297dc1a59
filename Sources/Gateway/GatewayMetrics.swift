import CoreMetrics
import Foundation
import GatehouseContracts
public import Prometheus
import Synchronization

/// The gateway's Prometheus registry, served at `/metrics`.
///
/// Request counts and latencies are written straight into `registry`, so they work without a
/// global metrics system. Other components (the RPC adapter's per-method `Timer`s, the identity
/// adapter's hash-pool gauge) reach the same registry through `factory`, either passed explicitly
/// (`Timer(label:dimensions:factory:)`) or via `bootstrapMetricsSystem()`.
public final class GatewayMetrics: Sendable {
    /// Everything `/metrics` shows.
    public let registry: PrometheusCollectorRegistry
    /// A swift-metrics factory writing into `registry`.
    public let factory: PrometheusMetricsFactory

    static let durationBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5),
    ]

    /// Metrics in `registry` (a new one unless given),
    /// with the gateway's latency buckets (1 ms to 5 s).
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = Self.durationBuckets
        self.factory = factory
        throttled = RateLimitClass.allCases.flatMap { kind in
            ThrottleReason.allCases.map { reason in
                registry.makeCounter(
                    descriptor: .init(
                        namespace: "gatehouse", subsystem: "http", metricName: "throttled_requests", unitName: "total",
                        helpText: "Requests refused with 429: reason client_address (the gateway's per-address limit, rate_limited) or account (the identity service's per-account throttle, too_many_attempts)."),
                    labels: [("class", kind.label), ("reason", reason.rawValue)])
            }
        }
    }

    /// Why a request was refused with 429.
    enum ThrottleReason: String, CaseIterable {
        /// The gateway's per-client-address limit (`rate_limited`).
        case clientAddress = "client_address"
        /// The identity service's per-account throttle (`too_many_attempts`).
        case account
    }

    /// One counter per (class, reason), made at start: counting a refusal takes no lock.
    private let throttled: [Prometheus.Counter]

    /// The identity service's latest mail delivery histogram (`recordMail`), shown by `render()`.
    let mailDelivery = Mutex<MailDeliveryHistogram?>(nil)

    /// Counts one request of `kind` refused for `reason`.
    func recordThrottled(_ kind: RateLimitClass, _ reason: ThrottleReason) {
        throttled[kind.rawValue * ThrottleReason.allCases.count + (reason == .clientAddress ? 0 : 1)].increment()
    }

    private static let bootstrapped = Mutex(false)

    /// Makes `factory` the process-wide swift-metrics backend. `MetricsSystem.bootstrap` may run only
    /// once per process, so only the first call (from any `GatewayMetrics`) does it; later calls
    /// return false and change nothing.
    @discardableResult
    public func bootstrapMetricsSystem() -> Bool {
        Self.bootstrapped.withLock { done in
            guard !done else { return false }
            MetricsSystem.bootstrap(factory)
            done = true
            return true
        }
    }

    private struct RequestKey: Hashable {
        var route: String
        var method: String
        var status: Int
    }
    private struct RPCKey: Hashable {
        var service: String
        var method: String
        var code: String
    }
    /// The metric objects per label set, so a request costs a dictionary look-up instead of the
    /// registry's (which builds the metric's name and label strings on every call).
    private let requestMetrics = Mutex<[RequestKey: (Prometheus.Counter, DurationHistogram)]>([:])
    private let rpcMetrics = Mutex<[RPCKey: DurationHistogram]>([:])

    /// Records one HTTP request. `route` is the route template (never the raw path, to bound cardinality).
    func recordRequest(route: String, method: String, status: Int, duration: Duration) {
        let key = RequestKey(route: route, method: method, status: status)
        let (counter, histogram) = requestMetrics.withLock { cache in
            if let known = cache[key] { return known }
            let made = makeRequestMetrics(route: route, method: method, status: status)
            cache[key] = made
            return made
        }
        counter.increment()
        histogram.record(duration)
    }

    private func makeRequestMetrics(route: String, method: String, status: Int) -> (Prometheus.Counter, DurationHistogram) {
        let counter = registry.makeCounter(
            descriptor: .init(
                namespace: "gatehouse", subsystem: "http", metricName: "requests", unitName: "total",
                helpText: "HTTP requests by route, method and status."),
            labels: [("route", route), ("method", method), ("status", String(status))]
        )
        let histogram = registry.makeDurationHistogram(
            descriptor: .init(
                namespace: "gatehouse", subsystem: "http", metricName: "request_duration", unitName: "seconds",
                helpText: "HTTP request latency by route, method and status."),
            labels: [("route", route), ("method", method), ("status", String(status))],
            buckets: Self.durationBuckets
        )
        return (counter, histogram)
    }

    /// Records one call to a service (`service` is `identity` or `token`, `method` the RPC's wire
    /// name, `code` `ok` or the error's stable code).
    public func recordRPC(service: String, method: String, code: String, duration: Duration) {
        let key = RPCKey(service: service, method: method, code: code)
        let histogram = rpcMetrics.withLock { cache in
            if let known = cache[key] { return known }
            let made = makeRPCHistogram(service: service, method: method, code: code)
            cache[key] = made
            return made
        }
        histogram.record(duration)
    }

    private func makeRPCHistogram(service: String, method: String, code: String) -> DurationHistogram {
        registry.makeDurationHistogram(
            descriptor: .init(
                namespace: "gatehouse", subsystem: "rpc", metricName: "call_duration", unitName: "seconds",
                helpText: "Latency of the gateway's calls to the identity and token services, by method and outcome."),
            labels: [("service", service), ("method", method), ("code", code)],
            buckets: Self.rpcDurationBuckets
        )
    }

    static let rpcDurationBuckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .seconds(2),
    ]

    /// Sets the hashing-pool gauges from the identity service's latest figures; with nil (the
    /// service did not answer) `gatehouse_identity_up` drops to 0 and the last figures stay.
    func recordHashPool(_ stats: IdentityStats?) {
        func gauge(_ name: String, _ help: String) -> Prometheus.Gauge {
            registry.makeGauge(descriptor: .init(namespace: "gatehouse", subsystem: "identity", metricName: name, unitName: "", helpText: help))
        }
        gauge("stats_up", "1 when the identity service answered the last stats call of a scrape, else 0.").set(Int64(stats == nil ? 0 : 1))
        guard let stats else { return }
        gauge("hash_pool_queue_depth", "Password-hash jobs waiting for a hashing thread.").set(Int64(stats.hashQueueDepth))
        gauge("hash_pool_queue_limit", "Most hash jobs allowed to wait; past it sign-up and sign-in answer 503 overloaded.").set(Int64(stats.hashQueueLimit))
        gauge("hash_pool_busy_workers", "Hashing threads running a job.").set(Int64(stats.hashBusyWorkers))
        gauge("hash_pool_workers", "Hashing threads.").set(Int64(stats.hashWorkers))
        gauge("hash_pool_completed_jobs", "Hash jobs finished since the identity service started.").set(Int64(stats.hashCompleted))
        gauge("hash_pool_rejected_jobs", "Hash jobs refused (overloaded) since the identity service started.").set(Int64(stats.hashRejected))
        recordMail(stats)
    }

    /// Sets the mail outbox's gauges (issue 19) from the identity service's figures.
    private func recordMail(_ stats: IdentityStats) {
        func gauge(_ name: String, _ help: String) -> Prometheus.Gauge {
            registry.makeGauge(descriptor: .init(namespace: "gatehouse", subsystem: "mail", metricName: name, unitName: "", helpText: help))
        }
        gauge("queued", "Mails waiting in the identity service's outbox.").set(stats.mailQueued)
        gauge("sent", "Mails delivered since the identity service started.").set(stats.mailSent)
        gauge("retried", "Failed mail deliveries scheduled again since the identity service started.").set(stats.mailRetried)
        gauge("dead", "Mails given up on (dead-lettered) since the identity service started.").set(stats.mailDead)
        gauge("delivery_latency_milliseconds_sum", "Sum of the delivered mails' times from enqueue to delivery (ms); divide by gatehouse_mail_sent for the mean.")
            .set(stats.mailDeliveryLatencyMsSum)
        if let histogram = MailDeliveryHistogram(stats) { mailDelivery.withLock { $0 = histogram } }
    }

    /// Sets the revocation-state gauges (at each scrape).
    func recordRevocations(_ state: RevocationState) {
        func gauge(_ name: String, _ help: String) -> Prometheus.Gauge {
            registry.makeGauge(descriptor: .init(namespace: "gatehouse", subsystem: "revocation", metricName: name, unitName: "", helpText: help))
        }
        gauge("state_current", "1 when the revocation state is loaded and no event is known missing; 0 while bearer requests wait or get 503.")
            .set(Int64(state.isCurrent ? 1 : 0))
        gauge("listed_sessions", "Revoked session ids held (their access tokens may still be valid).").set(Int64(state.list.count))
        gauge("snapshot_loads", "token.listRevocations snapshots loaded since the gateway started.").set(Int64(state.loads))
        gauge("snapshot_load_failures", "Failed token.listRevocations loads since the gateway started.").set(Int64(state.loadFailures))
    }

    /// The Prometheus text exposition.
    func render() -> [UInt8] { registry.emitToBuffer() + renderMailDelivery() }
}
