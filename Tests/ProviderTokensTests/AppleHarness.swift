import AsyncHTTPClient
import Crypto
import Foundation
import GatehouseSupport
import GatehouseTestSupport
import Logging
import ProviderTestSupport
import ProviderTokens
import Testing

/// Sign in with Apple's server side against the fake: a developer account registered with it,
/// the client secrets of that account, the token client, an ID token verifier and the
/// notification verifier, all on one manual clock (the fake's too).
struct AppleHarness {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    /// The team's `.p8` key (PKCS#8 PEM, as Apple hands it out).
    static let teamKey = P256.Signing.PrivateKey()
    static var teamKeyPEM: String { teamKey.pemRepresentation }
    static let services = ClientIDs.apple[1]

    let fake: FakeOpenIDProvider
    let base: String
    let clock: ManualClock
    let secrets: AppleClientSecret
    let client: AppleTokenClient
    let idTokens: IDTokenVerifier
    let notifications: AppleNotificationVerifier

    static func quiet() -> Logger {
        var logger = Logger(label: "apple-test")
        logger.logLevel = .critical
        return logger
    }

    /// Serves a fake (set up by `configure`) with the account registered, builds the pieces, runs `body`.
    static func run<T: Sendable>(
        logger: Logger = quiet(), configure: (FakeOpenIDProvider) -> Void = { _ in }, _ body: (AppleHarness) async throws -> T
    ) async throws -> T {
        let fake = FakeOpenIDProvider()
        let clock = ManualClock()
        fake.apple.set(clock: clock.wallClock)
        fake.apple.register(.init(teamID: teamID, keyID: keyID, publicKey: teamKey.publicKey, clientIDs: ClientIDs.apple))
        configure(fake)
        return try await fake.serve { base in
            let secrets = try AppleClientSecret(
                teamID: teamID, keyID: keyID, clientIDs: ClientIDs.apple, privateKeyPEM: teamKeyPEM, clock: clock.wallClock)
            let client = try AppleTokenClient(
                clientSecret: secrets, tokenURL: URL(string: base + "/auth/token")!, revokeURL: URL(string: base + "/auth/revoke")!,
                timeout: .milliseconds(300), allowInsecureLoopback: true, logger: logger)
            let idTokens = try IDTokenVerifier(
                providers: Harness.providers(base: base), httpClient: .shared, clock: clock.wallClock,
                options: .init(cachePolicy: Harness.policy), logger: logger)
            let notifications = AppleNotificationVerifier(
                sharingKeysOf: idTokens.cache(for: "apple")!, clock: clock.wallClock, options: .init(), logger: logger)
            return try await body(
                AppleHarness(
                    fake: fake, base: base, clock: clock, secrets: secrets, client: client, idTokens: idTokens, notifications: notifications))
        }
    }

    /// The error `exchange` throws (nil if it succeeded).
    func exchangeError(_ code: String, clientID: String = services, redirectURI: String? = nil) async -> AppleServerError? {
        do throws(AppleServerError) {
            _ = try await client.exchange(code: code, clientID: clientID, redirectURI: redirectURI)
            return nil
        } catch {
            #expect(!error.description.contains(code) || code.count < 8, "the error contains the code")
            return error
        }
    }

    /// The error `revoke` throws (nil if it succeeded).
    func revokeError(_ token: String, clientID: String = services) async -> AppleServerError? {
        do throws(AppleServerError) {
            try await client.revoke(token: token, clientID: clientID)
            return nil
        } catch {
            #expect(!error.description.contains(token), "the error contains the token")
            return error
        }
    }

    /// A notification body for the services id (see `FakeAppleEndpoints.notificationBody`).
    func notification(
        _ type: String = "consent-revoked", audience: String = services, email: String? = nil, isPrivateEmail: Any? = nil,
        eventsAsString: Bool = true, claims: [String: Any?] = [:], key: TestSigningKey? = nil
    ) -> Data {
        fake.apple.notificationBody(
            type: type, audience: audience, email: email, isPrivateEmail: isPrivateEmail, eventsAsString: eventsAsString,
            claims: claims, key: key)
    }

    /// The error refusing `body` (nil if accepted).
    func refusal(_ body: Data) async -> AppleNotificationError? {
        do throws(AppleNotificationError) {
            _ = try await notifications.verify(body: body)
            return nil
        } catch {
            return error
        }
    }
}

/// Decodes a base64url JSON segment of a compact JWS.
func jwsSegment(_ token: String, _ index: Int) throws -> [String: Any] {
    let part = token.split(separator: ".", omittingEmptySubsequences: false)[index]
    let data = try #require(Base64URL.decode(part))
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
}
