import AsyncHTTPClient
import Crypto
import Foundation
import GatehouseSupport
import GatehouseTestSupport
import Logging
import ProviderTestSupport
import ProviderTokens
import Testing

/// Client ids of the three providers the tests configure against the fake.
enum ClientIDs {
    static let apple = ["com.example.ios", "com.example.services"]
    static let google = ["123-web.apps.googleusercontent.com", "123-ios.apps.googleusercontent.com"]
    static let corp = ["gatehouse-web"]
}

/// A verifier whose providers all fetch their keys from one fake provider, and its clock.
///
/// - `apple`: issuer `https://appleid.apple.com` (only a claim), keys from the fake, the nonce
///   as SHA-256 hex;
/// - `google`: Google's two issuers, keys from the fake, the raw nonce;
/// - `corp`: a generic OpenID Connect provider whose issuer is the fake (found by discovery).
struct Harness {
    static let appleIssuer = "https://appleid.apple.com"
    static let googleIssuer = "https://accounts.google.com"

    let fake: FakeOpenIDProvider
    let base: String
    let clock: ManualClock
    let verifier: IDTokenVerifier

    /// The test policy: a 300 ms fetch deadline, an unknown-kid refetch at most every 60 s,
    /// max-age clamped to 60 s … 1 day (1 hour when absent).
    static let policy = JWKSCache.Policy(
        fetchTimeout: .milliseconds(300), minimumMaxAge: 60, maximumMaxAge: 86_400, defaultMaxAge: 3_600,
        unknownKeyRefetchInterval: 60)

    static func providers(base: String) throws -> [ProviderConfiguration] {
        let jwks = URL(string: base + "/jwks")!
        return [
            try ProviderConfiguration(
                name: "apple", issuers: [appleIssuer], keySource: .jwks(jwks), clientIDs: ClientIDs.apple, nonceForm: .sha256Hex,
                allowInsecureLoopback: true),
            try ProviderConfiguration(
                name: "google", issuers: [googleIssuer, "accounts.google.com"], keySource: .jwks(jwks), clientIDs: ClientIDs.google,
                nonceForm: .raw, allowInsecureLoopback: true),
            try .openIDConnect(name: "corp", issuer: base, clientIDs: ClientIDs.corp, allowInsecureLoopback: true),
        ]
    }

    /// Serves a fake provider (set up by `configure`), builds the verifier, runs `body`.
    static func run<T: Sendable>(
        configure: (FakeOpenIDProvider) -> Void = { _ in }, _ body: (Harness) async throws -> T
    ) async throws -> T {
        let fake = FakeOpenIDProvider()
        configure(fake)
        return try await fake.serve { base in
            let clock = ManualClock()
            var logger = Logger(label: "provider-tokens-test")
            logger.logLevel = .critical
            let verifier = try IDTokenVerifier(
                providers: providers(base: base), httpClient: .shared, clock: clock.wallClock,
                options: .init(clockSkew: 60, cachePolicy: policy), logger: logger)
            return try await body(Harness(fake: fake, base: base, clock: clock, verifier: verifier))
        }
    }

    /// Claims for `provider` issued now by the clock, with a fresh `jti` (so tokens never collide).
    func claims(_ provider: String, extra: [String: Any] = [:]) -> [String: Any] {
        var issuer = base
        var audience: Any = ClientIDs.corp[0]
        if provider == "apple" {
            issuer = Self.appleIssuer
            audience = ClientIDs.apple[0]
        } else if provider == "google" {
            issuer = Self.googleIssuer
            audience = [ClientIDs.google[0]]
        }
        var extra = extra
        if extra["jti"] == nil { extra["jti"] = UUID().uuidString }
        return standardClaims(issuer: issuer, audience: audience, now: clock.now, extra: extra)
    }

    /// A token for `provider` signed with `key` (by default the fake's first RSA key).
    func token(_ provider: String, key: TestSigningKey = .rsa1, extra: [String: Any] = [:]) -> String {
        TestTokens.sign(claims(provider, extra: extra), with: key)
    }

    func verify(_ token: String, _ provider: String, nonce: String? = nil) async throws -> VerifiedProviderToken {
        try await verifier.verify(idToken: token, provider: provider, nonce: nonce)
    }

    /// The error refusing `token`, after checking it leaks neither the token nor the nonce.
    func refusal(_ token: String, _ provider: String, nonce: String? = nil) async -> ProviderTokenError? {
        do throws(ProviderTokenError) {
            _ = try await verifier.verify(idToken: token, provider: provider, nonce: nonce)
            return nil
        } catch {
            for text in [error.description, error.message, "\(error)"] {
                if token.count >= 16 { #expect(!text.contains(token), "the error contains the token") }
                if let nonce, nonce.count >= 8 { #expect(!text.contains(nonce), "the error contains the nonce") }
            }
            return error
        }
    }

    /// The refusal's reason (nil when accepted or refused for another code).
    func reason(_ token: String, _ provider: String, nonce: String? = nil) async -> InvalidProviderTokenReason? {
        await refusal(token, provider, nonce: nonce)?.reason
    }
}

/// `sha256(text)` in lowercase hex, as Apple puts the nonce in its tokens.
func sha256Hex(_ text: String) -> String {
    SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
}
