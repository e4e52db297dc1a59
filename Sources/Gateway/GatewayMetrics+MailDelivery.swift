import Foundation
import GatehouseContracts
import Synchronization

/// `gatehouse_mail_delivery_seconds`: the identity service's enqueue-to-delivery histogram
/// (`IdentityStats.mailDeliverySecondsBuckets`), which it counts and the gateway only shows, so
/// it is written as Prometheus text here rather than observed into the registry.
struct MailDeliveryHistogram: Equatable {
    /// Cumulative counts, one per bound of `IdentityStats.mailDeliveryBucketBounds`, then `+Inf`.
    var cumulative: [Int64]
    /// The sum of the delivery times, in seconds.
    var sumSeconds: Double

    /// The histogram of `stats`, or nil when it has none (an identity service that does not count them).
    init?(_ stats: IdentityStats) {
        let bounds = IdentityStats.mailDeliveryBucketBounds
        guard stats.mailDeliverySecondsBuckets.count == bounds.count + 1 else { return nil }
        var total: Int64 = 0
        cumulative = stats.mailDeliverySecondsBuckets.map { count in
            total += max(0, count)
            return total
        }
        sumSeconds = Double(stats.mailDeliveryLatencyMsSum) / 1000
    }

    /// The Prometheus text exposition of the histogram.
    var text: String {
        let bounds = IdentityStats.mailDeliveryBucketBounds.map { Self.format($0) } + ["+Inf"]
        var lines = [
            "# HELP gatehouse_mail_delivery_seconds Time from enqueue to delivery of the mails the identity service delivered since it started.",
            "# TYPE gatehouse_mail_delivery_seconds histogram",
        ]
        for (bound, count) in zip(bounds, cumulative) {
            lines.append("gatehouse_mail_delivery_seconds_bucket{le=\"\(bound)\"} \(count)")
        }
        lines.append("gatehouse_mail_delivery_seconds_sum \(Self.format(sumSeconds))")
        lines.append("gatehouse_mail_delivery_seconds_count \(cumulative.last ?? 0)")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `0.05`, `1`, `2.5`: the shortest text of `value`.
    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

extension GatewayMetrics {
    /// The mail delivery histogram's lines, once the identity service reported one.
    func renderMailDelivery() -> [UInt8] {
        guard let histogram = mailDelivery.withLock({ $0 }) else { return [] }
        return Array(histogram.text.utf8)
    }
}
