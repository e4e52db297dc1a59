import Foundation
import GatehouseContracts
import GatehouseSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import Gateway

/// The gateway takes a caller's W3C `traceparent` (strictly), or starts a trace, binds it for
/// the request's work (what the RPC clients send) and returns it in the response.
@Suite struct GatewayTraceTests {
    static let incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    static let signIn = #"{"email":"ada@example.com","password":"correct horse battery"}"#

    @Test func aValidTraceparentIsUsedAndEchoed() async throws {
        try await Harness.run { h in
            _ = try await h.signUp()
            let r = try await h.request(.post, "/v1/sessions", json: Self.signIn, headers: [.traceparent: Self.incoming])
            #expect(r.status == .ok)
            #expect(r.headers[.traceparent] == Self.incoming)
            #expect(h.services.lastTrace(IdentityAPI.signIn) == TraceParent(Self.incoming))
        }
    }

    @Test(arguments: [
        nil, "", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "not a trace",
    ])
    func aMissingOrMalformedTraceparentStartsANewTrace(_ value: String?) async throws {
        try await Harness.run { h in
            _ = try await h.signUp()
            var headers: HTTPFields = [:]
            if let value { headers[.traceparent] = value }
            let r = try await h.request(.post, "/v1/sessions", json: Self.signIn, headers: headers)
            #expect(r.status == .ok)
            let returned = try #require(r.headers[.traceparent].flatMap { TraceParent($0) }, "no valid traceparent returned")
            #expect(returned.traceID != "4bf92f3577b34da6a3ce929d0e0e4736")
            #expect(h.services.lastTrace(IdentityAPI.signIn) == returned)
        }
    }

    @Test func errorsCarryTheTraceToo() async throws {
        try await Harness.run { h in
            let r = try await h.request(.get, "/nowhere", headers: [.traceparent: Self.incoming])
            #expect(r.status == .notFound)
            #expect(r.headers[.traceparent] == Self.incoming)
        }
    }
}
