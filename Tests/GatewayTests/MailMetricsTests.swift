import Foundation
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Synchronization
import Testing

@testable import Gateway

@Suite struct MailMetricsTests {
    @Test func metricsShowTheOutboxFiguresOfIdentityStats() async throws {
        try await Harness.run { h in
            var stats = IdentityStats(hashWorkers: 1)
            stats.mailQueued = 4
            stats.mailSent = 12
            stats.mailRetried = 3
            stats.mailDead = 1
            stats.mailDeliveryLatencyMsSum = 5400
            let current = Mutex(stats)
            h.services.override(IdentityAPI.stats) { _ in current.withLock { $0 } }
            var text = try await h.request(.get, "/metrics").text
            #expect(text.contains("gatehouse_mail_queued 4"), "\(text)")
            #expect(text.contains("gatehouse_mail_sent 12"))
            #expect(text.contains("gatehouse_mail_retried 3"))
            #expect(text.contains("gatehouse_mail_dead 1"))
            #expect(text.contains("gatehouse_mail_delivery_latency_milliseconds_sum 5400"))
            current.withLock { $0.mailQueued = 0 }
            text = try await h.request(.get, "/metrics").text
            #expect(text.contains("gatehouse_mail_queued 0"))
        }
    }

    @Test("gatehouse_mail_delivery_seconds: the identity service's buckets as a cumulative Prometheus histogram, with its sum and count")
    func deliveryHistogram() async throws {
        try await Harness.run { h in
            var stats = IdentityStats(hashWorkers: 1)
            stats.mailSent = 6
            stats.mailDeliveryLatencyMsSum = 95_250
            stats.mailDeliverySecondsBuckets = [1, 0, 2, 0, 0, 1, 0, 0, 0, 1, 1]
            let reported = stats
            h.services.override(IdentityAPI.stats) { _ in reported }
            let text = try await h.request(.get, "/metrics").text
            #expect(text.contains("# TYPE gatehouse_mail_delivery_seconds histogram"), "\(text)")
            for line in [
                "gatehouse_mail_delivery_seconds_bucket{le=\"0.05\"} 1", "gatehouse_mail_delivery_seconds_bucket{le=\"0.1\"} 1",
                "gatehouse_mail_delivery_seconds_bucket{le=\"0.25\"} 3", "gatehouse_mail_delivery_seconds_bucket{le=\"2.5\"} 4",
                "gatehouse_mail_delivery_seconds_bucket{le=\"30\"} 4", "gatehouse_mail_delivery_seconds_bucket{le=\"60\"} 5",
                "gatehouse_mail_delivery_seconds_bucket{le=\"+Inf\"} 6", "gatehouse_mail_delivery_seconds_sum 95.25",
                "gatehouse_mail_delivery_seconds_count 6",
            ] {
                #expect(text.contains(line + "\n"), "\(line)")
            }
        }
    }

    @Test("without buckets from the identity service (an older one), no histogram is shown")
    func noHistogramWithoutBuckets() async throws {
        try await Harness.run { h in
            h.services.override(IdentityAPI.stats) { _ in IdentityStats(hashWorkers: 1) }
            let text = try await h.request(.get, "/metrics").text
            #expect(text.contains("gatehouse_mail_sent"))
            #expect(!text.contains("gatehouse_mail_delivery_seconds"))
        }
    }
}
