import Foundation
import GatehouseTestSupport
import Testing

/// The HTTP layer's limits in the real binary: `gatehouse serve` configured through its keys.
@Suite("HTTP timeouts, caps and framing errors, end to end")
struct HTTPLimitsTests {
    @Test("gatehouse serve: a stalled head gets 408, a third connection from one address 503, bad framing 400")
    func serve() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("serve", environment: [
            "GATEHOUSE_HTTP_HEAD_TIMEOUT_MS": "300", "GATEHOUSE_HTTP_MAX_CONNECTIONS_PER_ADDRESS": "2",
        ])
        try await stack.waitReady()
        let port = stack.httpPort

        let stalled = try await RawConnection.open(port: port, from: "127.0.2.1")
        try await stalled.send("POST /v1/sessions HTTP/1.1\r\nHost: gatehouse\r\n")
        let late = try await stalled.response()
        #expect(late.problemMismatches(408, "request_timeout").isEmpty, "\(late.problemMismatches(408, "request_timeout"))")
        try await stalled.waitForClose()

        let healthz = "GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n"
        var held: [RawConnection] = []
        for _ in 0..<2 {
            let connection = try await RawConnection.open(port: port, from: "127.0.2.2")
            try await connection.send(healthz)
            #expect(try await connection.response().status == 200)
            held.append(connection)
        }
        let refused = try await RawConnection.open(port: port, from: "127.0.2.2")
        let busy = try await refused.response()
        #expect(busy.problemMismatches(503, "too_many_connections").isEmpty, "\(busy.problemMismatches(503, "too_many_connections"))")
        try await refused.waitForClose()

        let framing = try await RawConnection.open(port: port, from: "127.0.2.3")
        try await framing.send(
            "POST /v1/sessions HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        let bad = try await framing.response()
        #expect(bad.problemMismatches(400, "malformed_http").isEmpty, "\(bad.problemMismatches(400, "malformed_http"))")
        try await framing.waitForClose()
        #expect(held.count == 2)

        let metrics = String(decoding: try await stack.request("GET", "/metrics").body, as: UTF8.self)
        #expect(metrics.contains(#"gatehouse_http_connections_refused_total{reason="per_address"} 1"#))
        #expect(metrics.contains(#"gatehouse_http_rejected_requests_total{code="malformed_http"} 1"#))
    }
}
