import Foundation
import Logging
import ProviderTestSupport
import ProviderTokens
import Testing

/// What the Apple client and the notification verifier log, at every level, never holds a
/// code, a token, a client secret, the private key or a notification.
@Suite("Sign in with Apple: logs", .timeLimit(.minutes(1)))
struct AppleLogTests {
    @Test func noSecretCodeOrTokenIsLogged() async throws {
        let lines = LogLines()
        var logger = Logger(label: "apple-log-test", factory: { _ in RecordingLogHandler(lines: lines) })
        logger.logLevel = .trace
        let secrets: [String] = try await AppleHarness.run(logger: logger) { h in
            var secrets: [String] = []
            let code = "c.secret-code-0123456789"
            let refresh = h.fake.apple.register(code: code, clientID: AppleHarness.services)
            let response = try await h.client.exchange(code: code, clientID: AppleHarness.services)
            secrets += [code, refresh, response.accessToken, response.idToken, try h.secrets.secret(for: AppleHarness.services)]
            _ = await h.exchangeError(code)  // invalid_grant
            try await h.client.revoke(token: refresh, clientID: AppleHarness.services)
            h.fake.apple.set(revokeMode: .down)
            _ = await h.revokeError(refresh)
            h.fake.apple.set(tokenMode: .hang)
            _ = await h.exchangeError("c.another-secret-code")
            secrets.append("c.another-secret-code")
            let body = h.notification(email: "abc123@privaterelay.appleid.com")
            _ = try await h.notifications.verify(body: body)
            _ = await h.refusal(body)  // replayed
            _ = await h.refusal(h.notification(key: .rogue))
            let payload = try #require(try JSONSerialization.jsonObject(with: body) as? [String: String])["payload"]!
            secrets += [payload, "abc123@privaterelay.appleid.com"] + payload.split(separator: ".").map(String.init)
            return secrets
        }
        let logged = lines.all
        #expect(logged.contains { $0.contains("apple request failed") })
        #expect(logged.contains { $0.contains("apple notification refused") })
        let keyLines = AppleHarness.teamKeyPEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
        for line in logged {
            for secret in secrets + keyLines { #expect(!line.contains(secret), "\(line)") }
        }
    }
}
