import Foundation
import GatehouseContracts
import GatehouseTestSupport
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
}
