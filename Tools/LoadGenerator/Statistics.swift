import Foundation
import Histogram

/// How one request ended.
public enum RequestOutcome: Sendable, Equatable {
    case success
    /// The status was not the expected one.
    case unexpectedStatus(Int)
    /// The expected status, but the body failed the shape check.
    case badBody(String)
    /// No usable response: timeout, connect, connection closed, ... (`kind`), with a detail.
    case transport(kind: String, detail: String)
}

/// Latency summary in milliseconds (µs resolution).
public struct LatencySummary: Codable, Sendable, Equatable {
    /// Requests measured.
    public var count: UInt64
    /// The fastest, in ms (0 when `count` is 0, as every figure).
    public var min: Double
    /// The mean, in ms.
    public var mean: Double
    /// The median, in ms.
    public var p50: Double
    /// The 90th percentile, in ms.
    public var p90: Double
    /// The 99th percentile, in ms.
    public var p99: Double
    /// The 99.9th percentile, in ms.
    public var p999: Double
    /// The slowest, in ms.
    public var max: Double

    init(_ histogram: Histogram<UInt64>) {
        func ms(_ micros: UInt64) -> Double { Double(micros) / 1000 }
        count = histogram.totalCount
        guard count > 0 else {
            min = 0; mean = 0; p50 = 0; p90 = 0; p99 = 0; p999 = 0; max = 0
            return
        }
        min = ms(histogram.min)
        mean = histogram.mean.rounded() / 1000
        p50 = ms(histogram.valueAtPercentile(50))
        p90 = ms(histogram.valueAtPercentile(90))
        p99 = ms(histogram.valueAtPercentile(99))
        p999 = ms(histogram.valueAtPercentile(99.9))
        max = ms(histogram.max)
    }
}

/// Counts and latencies of one operation (or of all of them).
public struct OperationResult: Codable, Sendable, Equatable {
    /// Measured requests (warm-up and setup not included).
    public var totalRequests: Int
    /// Requests with the expected status and a body that passed its check.
    public var successfulRequests: Int
    /// `totalRequests` minus `successfulRequests`.
    public var failedRequests: Int
    /// Successful requests per second of the measured phase.
    public var throughput: Double
    /// Latency of successful requests.
    public var latencyMs: LatencySummary
    /// Latency of failed requests (any kind).
    public var errorLatencyMs: LatencySummary
    /// Responses with an unexpected status, by status code.
    public var errorsByStatus: [String: Int]
    /// Everything else, by kind: `bad_body`, `timeout`, `connect`, `connection_closed`, `body_too_large`, `other`.
    public var errorsByKind: [String: Int]
    /// The first detail seen for each error kind or status (for diagnosis).
    public var errorSamples: [String: String]
}

/// The result of a run. `--json` prints exactly this.
public struct LoadResult: Codable, Sendable {
    /// The scenario run, e.g. `refresh`.
    public var scenario: String
    /// The target's base URL.
    public var url: String
    /// Virtual users.
    public var concurrency: Int
    /// The duration bound in seconds.
    public var durationSeconds: Double
    /// The request bound, if any.
    public var requestLimit: Int?
    /// Seconds of unrecorded load before measuring.
    public var warmupSeconds: Double
    /// Wall time of the measured phase (from its start until the last measured request ended).
    public var elapsedSeconds: Double
    /// `duration` or `requests`: which bound ended the run.
    public var stoppedBy: String
    /// Users created during setup (0 for scenarios that need none).
    public var setupUsers: Int
    /// How long setup took, in seconds (not part of any figure below).
    public var setupSeconds: Double
    /// The weights of a `mixed` run (`me=70,refresh=20,...`); nil for other scenarios.
    public var mix: String?
    /// Sessions re-established by a sign-in after a failed refresh (not recorded as requests).
    public var sessionRecoveries: Int
    /// Sessions rotated outside the measurements because their access token was about to expire.
    public var sessionRenewals: Int
    /// Measured requests of every operation.
    public var totalRequests: Int
    /// Requests with the expected status and a body that passed its check.
    public var successfulRequests: Int
    /// `totalRequests` minus `successfulRequests`.
    public var failedRequests: Int
    /// Successful requests per second of the measured phase.
    public var throughput: Double
    /// Latency of successful requests.
    public var latencyMs: LatencySummary
    /// Latency of failed requests (any kind).
    public var errorLatencyMs: LatencySummary
    /// Responses with an unexpected status, by status code.
    public var errorsByStatus: [String: Int]
    /// Other failures by kind: `bad_body`, `timeout`, `connect`, `connection_closed`, ...
    public var errorsByKind: [String: Int]
    /// The first detail seen for each error kind or status (for diagnosis).
    public var errorSamples: [String: String]
    /// Per operation (one entry for single-operation scenarios).
    public var operations: [String: OperationResult]

    /// Whether any measured request failed (with `--fail-on-error` the CLI then exits 1).
    public var hadErrors: Bool { failedRequests > 0 }
}

/// Mutable tallies for one operation; lives inside the run's lock.
struct OperationTally {
    var total = 0
    var successes = 0
    var ok: Histogram<UInt64>
    var failed: Histogram<UInt64>
    var byStatus: [String: Int] = [:]
    var byKind: [String: Int] = [:]
    var samples: [String: String] = [:]

    init(highestMicros: UInt64) {
        ok = Histogram(highestTrackableValue: highestMicros, numberOfSignificantValueDigits: .three)
        failed = Histogram(highestTrackableValue: highestMicros, numberOfSignificantValueDigits: .three)
    }

    mutating func record(_ outcome: RequestOutcome, micros: UInt64) {
        total += 1
        let value = Swift.min(Swift.max(micros, 1), ok.highestTrackableValue)
        switch outcome {
        case .success:
            successes += 1
            ok.record(value)
            return
        case .unexpectedStatus(let status):
            byStatus[String(status), default: 0] += 1
        case .badBody(let reason):
            byKind["bad_body", default: 0] += 1
            if samples["bad_body"] == nil { samples["bad_body"] = reason }
        case .transport(let kind, let detail):
            byKind[kind, default: 0] += 1
            if samples[kind] == nil { samples[kind] = detail }
        }
        failed.record(value)
    }

    mutating func noteStatusSample(_ status: Int, _ detail: String) {
        if samples[String(status)] == nil { samples[String(status)] = detail }
    }

    mutating func merge(_ other: OperationTally) {
        total += other.total
        successes += other.successes
        ok.add(other.ok)
        failed.add(other.failed)
        byStatus.merge(other.byStatus, uniquingKeysWith: +)
        byKind.merge(other.byKind, uniquingKeysWith: +)
        samples.merge(other.samples) { first, _ in first }
    }

    func result(elapsed: Double) -> OperationResult {
        OperationResult(
            totalRequests: total,
            successfulRequests: successes,
            failedRequests: total - successes,
            throughput: elapsed > 0 ? Double(successes) / elapsed : 0,
            latencyMs: LatencySummary(ok),
            errorLatencyMs: LatencySummary(failed),
            errorsByStatus: byStatus,
            errorsByKind: byKind,
            errorSamples: samples
        )
    }
}
