import AsyncHTTPClient
import Foundation
import GatehouseTestSupport
import Logging
import ProviderTestSupport
import ProviderTokens
import Synchronization
import Testing

/// What the verifier logs, at every level, never holds a token or a nonce.
@Suite("Provider ID tokens: logs", .timeLimit(.minutes(1)))
struct LogTests {
    @Test func refusalsAndFailuresLogNoTokenAndNoNonce() async throws {
        let lines = LogLines()
        var logger = Logger(label: "provider-tokens-log-test", factory: { _ in RecordingLogHandler(lines: lines) })
        logger.logLevel = .trace
        let fake = FakeOpenIDProvider()
        let secrets: [String] = try await fake.serve { base in
            let clock = ManualClock()
            let verifier = try IDTokenVerifier(
                providers: Harness.providers(base: base), httpClient: .shared, clock: clock.wallClock,
                options: .init(cachePolicy: Harness.policy), logger: logger)
            let now = clock.now
            let nonce = "a-secret-raw-nonce-value"
            let good = TestTokens.sign(
                standardClaims(issuer: Harness.googleIssuer, audience: ClientIDs.google[0], now: now, extra: ["nonce": nonce]), with: .rsa1)
            let forged = TestTokens.sign(
                standardClaims(issuer: Harness.googleIssuer, audience: ClientIDs.google[0], now: now), with: .rogue)
            let attempts: [(String, String?)] = [(good, "another-secret-nonce"), (forged, nil), (good, nonce), (good, nonce)]
            for (token, sent) in attempts {
                _ = try? await verifier.verify(idToken: token, provider: "google", nonce: sent)
            }
            fake.set(mode: .down)
            clock.advance(by: 86_400)
            _ = try? await verifier.verify(idToken: good, provider: "google", nonce: nonce)
            return [good, forged, nonce, "another-secret-nonce"] + good.split(separator: ".").map(String.init)
        }
        let logged = lines.all
        #expect(logged.contains { $0.contains("provider token refused") })
        #expect(logged.contains { $0.contains("provider document fetch failed") })
        for line in logged {
            for secret in secrets { #expect(!line.contains(secret), "\(line)") }
        }
    }
}

/// The log lines recorded, shared by the handlers of one test.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])

    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

/// Keeps every log line, with its metadata, as text.
struct RecordingLogHandler: LogHandler {
    let lines: LogLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    func log(event: LogEvent) {
        var all = metadata
        for (key, value) in event.metadata ?? [:] { all[key] = value }
        lines.append("\(event.level) \(event.message) \(all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))")
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}
