import Foundation
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IdentityService
import Logging
import NIOCore
import RPCRouting
import Testing
import TokenService
@testable import Gateway

/// The admin listener over the real identity and token services in process: every bad input
/// gets its problem (never a 500), and the key and scope checks come first.
@Suite("Admin API: routes and bad input")
struct AdminRouteTests {
    /// Runs `test` against an admin listener over fresh services (SQLite users), with a key of
    /// every scope and one of `users:read` only.
    static func run(_ test: @Sendable (any TestClientProtocol, _ all: String, _ reader: String, InProcessServices) async throws -> Void) async throws {
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_700_000_000))
        let services = try await InProcessServices(clock: clock, issuer: "https://auth.test", audience: "gatehouse-test")
        let identity = LocalCaller(router: services.identityHandlers.router())
        let all = try await identity.call(IdentityAPI.createAdminKey, CreateAdminKeyRequest(name: "all", scopes: ["all"])).token
        let reader = try await identity.call(IdentityAPI.createAdminKey, CreateAdminKeyRequest(name: "reader", scopes: [AdminKey.Scope.usersRead])).token
        let parts = makeAdminAPI(
            configuration: AdminAPIConfiguration(port: 0), identity: identity, tokens: LocalCaller(router: services.token.router()),
            logger: Logger(label: "admin-test"))
        try await parts.application.test(.router) { client in try await test(client, all, reader, services) }
    }

    static func call(
        _ client: any TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, key: String?, body: String? = nil,
        contentType: String? = "application/json"
    ) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let key { headers[.authorization] = "Bearer \(key)" }
        if body != nil, let contentType { headers[.contentType] = contentType }
        return try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) }) { $0 }
    }

    @Test("bad bodies, queries and ids: 400, 404, 413, 415 and 422 problems; the scope check comes before the body is read")
    func badInput() async throws {
        try await Self.run { client, all, reader, _ in
            let create = try await Self.call(client, .post, "/admin/v1/users", key: all, body: #"{"email":"ana@example.com","password":"correct horse battery"}"#)
            #expect(create.status == .created)
            let id = try #require(try create.object()["id"] as? String)

            _ = try await Self.call(client, .post, "/admin/v1/users", key: all, body: "{not json").expectProblem(.badRequest, "malformed_request")
            _ = try await Self.call(client, .post, "/admin/v1/users", key: all, body: #"{"email":"x"}"#, contentType: "text/plain")
                .expectProblem(.unsupportedMediaType, "unsupported_media_type")
            _ = try await Self.call(client, .post, "/admin/v1/users", key: all, body: #"{"email":"not an address"}"#)
                .expectProblem(.unprocessableContent, "invalid_email")
            _ = try await Self.call(client, .post, "/admin/v1/users", key: all, body: #"{"email":"b@example.com","password":"password"}"#)
                .expectProblem(.unprocessableContent, "weak_password")
            _ = try await Self.call(client, .post, "/admin/v1/users", key: all, body: #"{"email":"ana@example.com"}"#)
                .expectProblem(.conflict, "email_exists")
            // The reader's key is refused before its (malformed) body is looked at.
            _ = try await Self.call(client, .post, "/admin/v1/users", key: reader, body: "{not json").expectProblem(.forbidden, "insufficient_scope")

            for query in ["limit=0", "limit=abc", "disabled=yes", "createdAfter=yesterday", "cursor=%20bad%20"] {
                let r = try await Self.call(client, .get, "/admin/v1/users?\(query)", key: reader)
                _ = try r.expectProblem(.unprocessableContent, "invalid_argument")
            }
            _ = try await Self.call(client, .get, "/admin/v1/users/AAAAAAAAAAAAAAAAAAAAAA", key: reader).expectProblem(.notFound, "user_not_found")
            _ = try await Self.call(client, .get, "/admin/v1/users/not-an-id", key: reader).expectProblem(.notFound, "user_not_found")
            _ = try await Self.call(client, .patch, "/admin/v1/users/\(id)", key: all, body: "{}").expectProblem(.unprocessableContent, "invalid_argument")
            _ = try await Self.call(client, .patch, "/admin/v1/users/\(id)", key: all, body: #"{"disabled":"yes"}"#)
                .expectProblem(.badRequest, "malformed_request")
            _ = try await Self.call(client, .put, "/admin/v1/users/\(id)/claims", key: all, body: String(repeating: "x", count: 5000))
                .expectProblem(.contentTooLarge, "payload_too_large")
            _ = try await Self.call(client, .put, "/admin/v1/users/\(id)/claims", key: all, body: #"{"sub":"x"}"#)
                .expectProblem(.unprocessableContent, "invalid_argument")
            _ = try await Self.call(client, .post, "/admin/v1/users/\(id)/links", key: all, body: #"{"kind":"magic"}"#)
                .expectProblem(.unprocessableContent, "invalid_argument")
            for query in ["cursor=1", "cursor=a.b", "limit=1001", "since=never", "userId=" + String(repeating: "u", count: 200)] {
                _ = try await Self.call(client, .get, "/admin/v1/audit?\(query)", key: all).expectProblem(.unprocessableContent, "invalid_argument")
            }
            _ = try await Self.call(client, .delete, "/admin/v1/users", key: all).expectProblem(.methodNotAllowed, "method_not_allowed")
            _ = try await Self.call(client, .get, "/admin/v1/nothing", key: all).expectProblem(.notFound, "not_found")
            // The key: missing, not a bearer, too long.
            _ = try await Self.call(client, .get, "/admin/v1/users", key: nil).expectProblem(.unauthorized, "invalid_admin_key")
            var headers: HTTPFields = [.authorization: "Basic \(all)"]
            _ = try await client.execute(uri: "/admin/v1/users", method: .get, headers: headers, body: nil) { $0 }
                .expectProblem(.unauthorized, "invalid_admin_key")
            headers[.authorization] = "Bearer " + String(repeating: "g", count: 500)
            _ = try await client.execute(uri: "/admin/v1/users", method: .get, headers: headers, body: nil) { $0 }
                .expectProblem(.unauthorized, "invalid_admin_key")
        }
    }

    @Test("the merged audit page: both services' events in time order, the cursor continues where the page ended, more says whether events wait")
    func auditPages() async throws {
        try await Self.run { client, all, _, _ in
            for n in 0..<3 {
                let r = try await Self.call(client, .post, "/admin/v1/users", key: all, body: #"{"email":"u\#(n)@example.com"}"#)
                #expect(r.status == .created)
            }
            // Two admin keys made, three users: five identity events.
            let first = try await Self.call(client, .get, "/admin/v1/audit?limit=2", key: all).object()
            #expect((first["events"] as? [[String: Any]])?.compactMap { $0["kind"] as? String } == ["admin_key.created", "admin_key.created"])
            #expect(first["more"] as? Bool == true && first["nextCursor"] as? String == "2.0")
            let rest = try await Self.call(client, .get, "/admin/v1/audit?cursor=2.0", key: all).object()
            let kinds = (rest["events"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }
            #expect(kinds == ["user.created", "user.created", "user.created"])
            #expect(rest["more"] as? Bool == false && rest["nextCursor"] as? String == "5.0")
            #expect((rest["events"] as? [[String: Any]])?.allSatisfy { ($0["actor"] as? String)?.hasPrefix("admin_key:") == true } == true)
        }
    }
}
