import Foundation
import GatehouseSupport
import GatehouseTestSupport
import Logging
import Testing

@testable import GatehouseApp

@Suite struct LogHandlerTests {
    @Test func linesHaveStreamLogHandlersShape() {
        let line = StandardErrorLogHandler.format(
            timestamp: "2026-01-31T12:00:00+0000", level: .warning, label: "gatehouse.rpc",
            metadata: ["rpc.id": "7", "a": "b"], source: "GatehouseRPC", message: "slow call")
        #expect(line == "2026-01-31T12:00:00+0000 warning gatehouse.rpc: a=b rpc.id=7 [GatehouseRPC] slow call\n")
        let bare = StandardErrorLogHandler.format(
            timestamp: "t", level: .info, label: "gatehouse", metadata: [:], source: "gatehouse", message: "up")
        #expect(bare == "t info gatehouse: [gatehouse] up\n")
    }

    @Test func laterMetadataWinsAndErrorsAreNamed() {
        struct Boom: Error {}
        let merged = StandardErrorLogHandler.merge(
            base: ["k": "base", "only": "1"], provided: ["k": "provided"], explicit: ["k": "explicit"], error: Boom())
        #expect(merged["k"] == "explicit")
        #expect(merged["only"] == "1")
        #expect(merged["error.message"] == "Boom()")
        #expect(merged["error.type"]?.description.hasSuffix("Boom") == true)
    }

    @Test func metadataIsAValuePerLogger() {
        var a = Logger(label: "x") { StandardErrorLogHandler(label: $0, level: .info) }
        a[metadataKey: "request_id"] = "r1"
        var b = a
        b[metadataKey: "request_id"] = "r2"
        #expect(a[metadataKey: "request_id"] == "r1")
        #expect(b[metadataKey: "request_id"] == "r2")
        #expect(a.logLevel == .info)
    }

    @Test func traceIDComesFromTheTasksTraceWhenALineIsWritten() async throws {
        let trace = try #require(TraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        #expect(Logger.MetadataProvider.traceID.get().isEmpty)
        TraceContext.$current.withValue(trace) {
            let merged = StandardErrorLogHandler.merge(
                base: ["request_id": "r1"], provided: Logger.MetadataProvider.traceID.get(), explicit: nil, error: nil)
            #expect(merged["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736")
            #expect(merged["request_id"] == "r1")
        }
    }

    @Test func timestampsLookLikeStreamLogHandlers() {
        let stamp = StandardErrorLogHandler.timestamp(ManualClock().now)
        // 2027-01-15T08:00:00+0000 (in the machine's time zone)
        #expect(stamp.utf8.count == 24, "\(stamp)")
        #expect(stamp.dropFirst(10).first == "T")
        #expect(stamp.hasPrefix("2027-01-1"), "\(stamp)")
    }
}
