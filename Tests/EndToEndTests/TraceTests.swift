import Foundation
import Testing

/// One request followed across the three processes by its W3C trace id.
@Suite("Tracing across processes")
struct TracingTests {
    @Test("a sign-in and a refresh with a traceparent leave that trace id in the gateway's, the identity's and the token's log, and the responses echo it")
    func followARequestWithGrep() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        // The services write a debug line per handled call; the gateway its access line at info.
        try stack.start("identity", environment: ["GATEHOUSE_LOG_LEVEL": "debug"], captureLog: true)
        try stack.start("token", environment: ["GATEHOUSE_LOG_LEVEL": "debug"], captureLog: true)
        try stack.start("gateway", environment: ["GATEHOUSE_LOG_LEVEL": "info"], captureLog: true)
        try await stack.waitReady()
        let email = "trace-\(UUID().uuidString.prefix(8))@example.com"
        let password = "correct horse battery staple"
        let signUp = try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": password])
        #expect(signUp.status == 201)

        // Sign-in: gateway → identity → token.
        let signInTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let signIn = try await stack.request(
            "POST", "/v1/sessions", json: ["email": email, "password": password], headers: ["traceparent": signInTrace])
        #expect(signIn.status == 200)
        #expect(signIn.headers["traceparent"] == signInTrace)
        let signInID = "trace_id=0af7651916cd43dd8448eb211c80319c"
        for role in ["gateway", "identity", "token"] {
            let line = try await stack.waitForLogLine(of: role, containing: signInID)
            #expect(line != nil, "no line with \(signInID) in the \(role)'s log:\n\(stack.log(of: role))")
        }
        // The line of each call on the way.
        #expect(try await stack.waitForLogLine(of: "identity", containing: "identity.signIn ok", signInID) != nil)
        #expect(try await stack.waitForLogLine(of: "token", containing: "token.issueSession ok", signInID) != nil)

        // Refresh: gateway → token → identity.
        let refreshToken = try #require((signIn.json["session"] as? [String: Any])?["refreshToken"] as? String)
        let refreshTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        let refreshed = try await stack.request(
            "POST", "/v1/sessions/refresh", json: ["refreshToken": refreshToken], headers: ["traceparent": refreshTrace])
        #expect(refreshed.status == 200)
        #expect(refreshed.headers["traceparent"] == refreshTrace)
        let refreshID = "trace_id=4bf92f3577b34da6a3ce929d0e0e4736"
        #expect(try await stack.waitForLogLine(of: "gateway", containing: refreshID) != nil)
        #expect(try await stack.waitForLogLine(of: "token", containing: "token.refresh ok", refreshID) != nil)
        #expect(try await stack.waitForLogLine(of: "identity", containing: "identity.claimsForSession ok", refreshID) != nil)

        // No trace given: the gateway starts one and returns it.
        let started = try await stack.request("GET", "/healthz")
        #expect(started.headers["traceparent"]?.count == 55)

        // Secrets never reach a log line, not even at debug.
        let newRefresh = (refreshed.json["session"] as? [String: Any])?["refreshToken"] as? String ?? "?"
        for role in ["gateway", "identity", "token"] {
            let log = stack.log(of: role)
            #expect(!log.contains(password) && !log.contains(refreshToken) && !log.contains(newRefresh), "a secret in the \(role)'s log")
        }
    }
}
