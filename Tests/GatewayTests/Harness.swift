import Foundation
import GatehouseContracts
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing
import GatehouseTestSupport
import IdentityService

@testable import Gateway

/// A gateway over the real services in process (`InProcessServices`), driven through HummingbirdTesting.
struct Harness {
    let client: any TestClientProtocol
    let services: InProcessServices
    let parts: GatewayParts
    let clock: ManualClock
    let metrics: GatewayMetrics

    static func configuration(_ edit: (inout GatewayConfiguration) -> Void = { _ in }) -> GatewayConfiguration {
        var c = GatewayConfiguration(issuer: "https://auth.test", audience: "gatehouse-test", publicBaseURL: "https://auth.test")
        c.port = 0
        // Tests beat the token service's heartbeat by hand: no polling of a silent feed.
        c.revocationHeartbeat = .seconds(3600)
        edit(&c)
        return c
    }

    /// Runs `test` against a new gateway: over `reusing`'s services and clock when given (a
    /// restarted gateway), otherwise over new ones.
    static func run(
        _ framework: TestingSetup = .router,
        reusing: Harness? = nil,
        configure: (inout GatewayConfiguration) -> Void = { _ in },
        logs: LogRecorder? = nil,
        emailVerification: EmailFlowSettings.Verification = .off,
        changeFeed: (@Sendable () -> AsyncStream<ChangeNotice>)? = nil,
        _ test: @Sendable (Harness) async throws -> Void
    ) async throws {
        let clock = reusing?.clock ?? ManualClock(start: Date(timeIntervalSince1970: 1_700_000_000))
        let services: InProcessServices
        if let reusing { services = reusing.services } else {
            services = try await InProcessServices(
                clock: clock, issuer: "https://auth.test", audience: "gatehouse-test",
                emailVerification: emailVerification)
            await services.signer.addSigningKey(kid: "test-key-1", publish: true)
        }
        let metrics = GatewayMetrics()
        var logger = logs.map { recorder in Logger(label: "gateway-test") { _ in recorder } } ?? Logger(label: "gateway-test")
        logger.logLevel = logs == nil ? .warning : .trace
        var gatewayServices = services.gatewayServices
        if let changeFeed { gatewayServices.userChanges = changeFeed }
        let parts = makeGateway(
            configuration: configuration(configure), services: gatewayServices, logger: logger, metrics: metrics, clock: clock.wallClock)
        try await parts.application.test(framework) { client in
            try await test(Harness(client: client, services: services, parts: parts, clock: clock, metrics: metrics))
        }
    }

    @discardableResult
    func request(
        _ method: HTTPRequest.Method, _ uri: String, json: String? = nil, token: String? = nil,
        headers: HTTPFields = [:], contentType: String? = "application/json"
    ) async throws -> TestResponse {
        var headers = headers
        if let token { headers[.authorization] = "Bearer \(token)" }
        if json != nil, let contentType, headers[.contentType] == nil { headers[.contentType] = contentType }
        return try await client.execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) }) { $0 }
    }

    /// Signs up and returns the parsed `{user, session}`.
    func signUp(_ email: String = "ada@example.com", password: String = "correct horse battery") async throws -> (user: [String: Any], session: [String: Any]) {
        let r = try await request(.post, "/v1/accounts", json: #"{"email":"\#(email)","password":"\#(password)"}"#)
        #expect(r.status == .created)
        let body = try r.object()
        return (body["user"] as! [String: Any], body["session"] as! [String: Any])
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }
    func object() throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    /// Checks the RFC 9457 shape and returns the body.
    @discardableResult
    func expectProblem(_ status: HTTPResponse.Status, _ code: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        #expect(self.status == status, "\(text)", sourceLocation: sourceLocation)
        #expect(headers[.contentType] == "application/problem+json", sourceLocation: sourceLocation)
        let body = try object()
        #expect(body["code"] as? String == code, "\(text)", sourceLocation: sourceLocation)
        #expect(body["type"] as? String == "https://gatehouse.dev/errors/\(code)", sourceLocation: sourceLocation)
        #expect(body["status"] as? Int == Int(status.code), sourceLocation: sourceLocation)
        #expect(body["title"] as? String == status.reasonPhrase, sourceLocation: sourceLocation)
        #expect(body["detail"] is String, sourceLocation: sourceLocation)
        return body
    }
}
