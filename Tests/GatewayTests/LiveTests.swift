import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import Gateway

@Suite struct LiveTests {
    @Test func liveServerRoundTrip() async throws {
        try await Harness.run(.live) { h in
            let (_, session) = try await h.signUp()
            let me = try await h.request(.get, "/v1/me", token: session["accessToken"] as? String, headers: [.xRequestID: "live-1"])
            #expect(me.status == .ok)
            #expect(me.headers[.xRequestID] == "live-1")
            try await h.request(.get, "/missing").expectProblem(.notFound, "not_found")
            try await h.request(.delete, "/healthz").expectProblem(.methodNotAllowed, "method_not_allowed")
        }
    }

    /// Oversized request headers are refused by the HTTP parser (NIO/llhttp) with a 4xx, never a 500.
    @Test func oversizedHeadersAreAClientError() async throws {
        try await Harness.run(.live) { h in
            do {
                let r = try await h.request(.get, "/healthz", headers: [HTTPField.Name("X-Big")!: String(repeating: "a", count: 100_000)])
                #expect((400..<500).contains(r.status.code), "got \(r.status)")
            } catch {
                Issue.record("connection failed instead of a 4xx: \(error)")
            }
        }
    }
}
