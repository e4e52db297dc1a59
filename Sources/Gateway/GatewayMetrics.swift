import CoreMetrics
import Foundation
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

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = Self.durationBuckets
        self.factory = factory
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

    /// Records one HTTP request. `route` is the route template (never the raw path, to bound cardinality).
    func recordRequest(route: String, method: String, status: Int, duration: Duration) {
        registry.makeCounter(
            descriptor: .init(
                namespace: "gatehouse", subsystem: "http", metricName: "requests", unitName: "total",
                helpText: "HTTP requests by route, method and status."),
            labels: [("route", route), ("method", method), ("status", String(status))]
        ).increment()
        registry.makeDurationHistogram(
            descriptor: .init(
                namespace: "gatehouse", subsystem: "http", metricName: "request_duration", unitName: "seconds",
                helpText: "HTTP request latency by route, method and status."),
            labels: [("route", route), ("method", method), ("status", String(status))],
            buckets: Self.durationBuckets
        ).record(duration)
    }

    /// The Prometheus text exposition.
    func render() -> [UInt8] { registry.emitToBuffer() }
}
