import Foundation
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Prometheus
import Testing

@testable import Gateway

/// What the HTTP layer itself refuses is answered problem+json with a code from the one table,
/// over real sockets, and is never a 500 or an error-level log line.
@Suite struct FramingTests {
    static let signInHead = "POST /v1/sessions HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/json\r\n"

    /// Sends `bytes` on a new connection (then ends our side when `halfClose`), and returns the
    /// one response, after checking the connection is closed after it.
    func exchange(_ h: Harness, _ bytes: String, halfClose: Bool = false) async throws -> RawResponse {
        let connection = try await RawConnection.open(port: h.client.port!)
        try await connection.send(bytes)
        if halfClose { connection.shutdownWrite() }
        let response = try await connection.response()
        try await connection.waitForClose()
        #expect(response.headers["connection"] == "close")
        return response
    }

    /// Requests whose body is cut short by the end of the client's stream.
    static let cutBodies: [String: String] = [
        // A chunked body whose chunk is cut short.
        "truncated chunk": signInHead + "Transfer-Encoding: chunked\r\n\r\n40\r\n{\"email\":\"ada@example.com\"",
        // A Content-Length the body never reaches.
        "short Content-Length": signInHead + "Content-Length: 100\r\n\r\n{\"email\":\"ada@example.com\"",
    ]

    @Test(arguments: cutBodies.keys.sorted())
    func aBodyCutShortIs400(name: String) async throws {
        let logs = LogRecorder()
        try await Harness.run(.live, logs: logs) { h in
            let response = try await exchange(h, Self.cutBodies[name]!, halfClose: true)
            response.expectProblem(400, "incomplete_body")
            #expect(h.services.calls(to: IdentityAPI.signIn) == 0)
        }
        #expect(logs.errors.isEmpty, "\(logs.errors)")
    }

    /// Requests the HTTP parser refuses, with the status and code they get.
    static let badRequests: [String: (bytes: String, status: Int, code: String)] = [
        "bad chunk size": (signInHead + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400, "malformed_http"),
        "Content-Length and Transfer-Encoding": (
            signInHead + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400, "malformed_http"
        ),
        "two Content-Lengths": (signInHead + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{} ", 400, "malformed_http"),
        "invalid header name": ("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nBad Header: x\r\n\r\n", 400, "malformed_http"),
        "invalid method": ("G(T /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n", 400, "malformed_http"),
        "invalid request target": ("GET /heal thz HTTP/1.1\r\nHost: gatehouse\r\n\r\n", 400, "malformed_http"),
        "garbage after the version": ("GET /healthz HTTP/1.1 extra\r\nHost: gatehouse\r\n\r\n", 505, "http_version_not_supported"),
        "HTTP/2 on HTTP/1": ("GET /healthz HTTP/2.0\r\nHost: gatehouse\r\n\r\n", 505, "http_version_not_supported"),
        "HTTP/3": ("GET /healthz HTTP/3.0\r\nHost: gatehouse\r\n\r\n", 505, "http_version_not_supported"),
        "oversize header": (
            "GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nX-Big: \(String(repeating: "a", count: 100_000))\r\n\r\n", 431,
            "header_fields_too_large"
        ),
        "request line too long": (
            "GET /\(String(repeating: "a", count: 100_000)) HTTP/1.1\r\nHost: gatehouse\r\n\r\n", 414, "uri_too_long"
        ),
        // "GET /" + 8,179 + " HTTP/1.1": one byte over the 8 KiB line.
        "request line one byte over 8 KiB": (
            "GET /\(String(repeating: "a", count: 8_179)) HTTP/1.1\r\nHost: gatehouse\r\n\r\n", 414, "uri_too_long"
        ),
        "bare LF line ends": ("GET /healthz HTTP/1.1\nHost: gatehouse\n\n", 400, "malformed_http"),
    ]

    /// A request line of exactly 8 KiB is read (and routed: 404 here), also after empty lines.
    @Test func aRequestLineOf8KiBIsRead() async throws {
        try await Harness.run(.live) { h in
            let connection = try await RawConnection.open(port: h.client.port!)
            try await connection.send("\r\nGET /\(String(repeating: "a", count: 8_178)) HTTP/1.1\r\nHost: gatehouse\r\n\r\n")
            try await connection.response().expectProblem(404, "not_found")
        }
    }

    /// The line limit applies to each request of a kept-alive connection, counted from its own start.
    @Test func aLaterRequestLineOverTheLimitIs414() async throws {
        try await Harness.run(.live) { h in
            let connection = try await RawConnection.open(port: h.client.port!)
            let line = "GET /\(String(repeating: "a", count: 8_000)) HTTP/1.1\r\nHost: gatehouse\r\n\r\n"
            try await connection.send(line)
            try await connection.response().expectProblem(404, "not_found")
            try await connection.send(line)
            try await connection.response().expectProblem(404, "not_found")
            try await connection.send("GET /\(String(repeating: "a", count: 9_000)) HTTP/1.1\r\nHost: gatehouse\r\n\r\n")
            let refused = try await connection.response()
            refused.expectProblem(414, "uri_too_long")
            #expect(refused.headers["connection"] == "close")
            try await connection.waitForClose()
        }
    }

    @Test(arguments: badRequests.keys.sorted())
    func badFramingIsAProblem(name: String) async throws {
        let (bytes, status, code) = Self.badRequests[name]!
        let logs = LogRecorder()
        try await Harness.run(.live, logs: logs) { h in
            let response = try await exchange(h, bytes)
            response.expectProblem(status, code)
            #expect(h.services.calls(to: IdentityAPI.signIn) == 0)
            #expect(h.metrics.registry.emitToString().contains(#"gatehouse_http_rejected_requests_total{code="\#(code)"} 1"#))
        }
        #expect(logs.errors.isEmpty, "\(logs.errors)")
    }

    /// A bad request behind a good one on the same connection: the good one is answered first,
    /// then the problem, then the connection closes.
    @Test func aBadRequestPipelinedBehindAGoodOneIsAnsweredInOrder() async throws {
        try await Harness.run(.live) { h in
            let connection = try await RawConnection.open(port: h.client.port!)
            try await connection.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\nGET /healthz HTTP/1.1\r\nBad Header: x\r\n\r\n")
            let first = try await connection.response()
            #expect(first.status == 200)
            #expect(first.json["status"] as? String == "ok")
            try await connection.response().expectProblem(400, "malformed_http")
            try await connection.waitForClose()
        }
    }

    /// A client that closes before its body is complete gets nothing (there is no one to answer)
    /// and the gateway logs no error; a request on another connection still works.
    @Test func aBodyCutByAFullCloseLogsNoError() async throws {
        let logs = LogRecorder()
        try await Harness.run(.live, logs: logs) { h in
            for _ in 0..<5 {
                let connection = try await RawConnection.open(port: h.client.port!)
                try await connection.send(Self.signInHead + "Content-Length: 100\r\n\r\n{\"email\":")
                connection.closeBothWays()
            }
            try await waitUntil("the five cut bodies are seen") {
                h.metrics.registry.emitToString().contains(#"gatehouse_http_rejected_requests_total{code="incomplete_body"} 5"#)
            }
            #expect(try await h.request(.get, "/healthz").status == .ok)
            #expect(h.services.calls(to: IdentityAPI.signIn) == 0)
        }
        #expect(logs.errors.isEmpty, "\(logs.errors)")
        #expect(!logs.lines.contains { $0.message.contains("unexpected error") })
    }

    /// Hummingbird's own errors are answered with the table's row for their status.
    @Test(arguments: [
        (HTTPResponse.Status.badRequest, 400, "malformed_request"),
        (.contentTooLarge, 413, "payload_too_large"),
        (.methodNotAllowed, 405, "method_not_allowed"),
        (.requestTimeout, 408, "request_timeout"),
        (.unsupportedMediaType, 415, "unsupported_media_type"),
        (HTTPResponse.Status(code: 418), 400, "malformed_request"),
        (.badGateway, 500, "internal"),
    ])
    func hummingbirdErrorsGoThroughTheTable(status: HTTPResponse.Status, expected: Int, code: String) async throws {
        try await Harness.run { h in
            let request = Request(head: HTTPRequest(method: .delete, scheme: "http", authority: "x", path: "/healthz"), body: .init(buffer: .init()))
            let problem = h.parts.routes.tableError(HTTPError(status), request: request)
            #expect(Int(problem.status.code) == expected)
            #expect(problem.code == code)
            #expect(ErrorTable.entries[.init(rawValue: code)]?.status == problem.status)
            if code == "method_not_allowed" { #expect(problem.headers[.allow] == "GET") }
        }
    }
}
