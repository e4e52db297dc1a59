import Foundation
import ProviderTokens
import Testing

/// Provider configurations: the presets, and plain `http` only in test mode on loopback.
@Suite("Provider ID tokens: configuration")
struct ProviderConfigurationTests {
    @Test func applePreset() throws {
        let apple = try ProviderConfiguration.apple(clientIDs: ["com.example.ios", "com.example.services"])
        #expect(apple.name == "apple")
        #expect(apple.issuers == ["https://appleid.apple.com"])
        #expect(apple.keySource == .jwks(URL(string: "https://appleid.apple.com/auth/keys")!))
        #expect(apple.nonceForm == .sha256Hex)
        #expect(apple.clientIDs == ["com.example.ios", "com.example.services"])
    }

    @Test func googlePreset() throws {
        let google = try ProviderConfiguration.google(clientIDs: ["123-web.apps.googleusercontent.com"])
        #expect(google.issuers == ["https://accounts.google.com", "accounts.google.com"])
        #expect(google.keySource == .jwks(URL(string: "https://www.googleapis.com/oauth2/v3/certs")!))
        #expect(google.nonceForm == .raw)
    }

    @Test func genericProviderUsesDiscovery() throws {
        let corp = try ProviderConfiguration.openIDConnect(name: "corp", issuer: "https://login.example.com/tenant", clientIDs: ["web"])
        #expect(corp.issuers == ["https://login.example.com/tenant"])
        #expect(corp.keySource == .discovery(URL(string: "https://login.example.com/tenant")!))
    }

    @Test func aProviderNeedsAClientID() {
        #expect(throws: ProviderConfigurationError.self) { try ProviderConfiguration.apple(clientIDs: []) }
        #expect(throws: ProviderConfigurationError.self) { try ProviderConfiguration.google(clientIDs: [""]) }
    }

    @Test func plainHTTPIssuerIsRefusedOutsideTestMode() {
        do throws(ProviderConfigurationError) {
            _ = try ProviderConfiguration.openIDConnect(name: "corp", issuer: "http://127.0.0.1:8080", clientIDs: ["web"])
            Issue.record("accepted a plain http issuer")
        } catch {
            #expect(error.message.contains("https"), "\(error.message)")
            #expect(error.message.contains("test mode"), "\(error.message)")
        }
        #expect(throws: ProviderConfigurationError.self) {
            try ProviderConfiguration(
                name: "apple", issuers: ["https://appleid.apple.com"], keySource: .jwks(URL(string: "http://appleid.apple.com/auth/keys")!),
                clientIDs: ["com.example.ios"])
        }
    }

    @Test func plainHTTPIsRefusedOffLoopbackEvenInTestMode() {
        for issuer in ["http://login.example.com", "http://10.0.0.5:8080", "http://127.0.0.1.example.com", "http://[::2]:80", "http://1270.0.0.1"] {
            do throws(ProviderConfigurationError) {
                _ = try ProviderConfiguration.openIDConnect(name: "corp", issuer: issuer, clientIDs: ["web"], allowInsecureLoopback: true)
                Issue.record("accepted \(issuer)")
            } catch {
                #expect(error.message.contains("loopback"), "\(issuer): \(error.message)")
            }
        }
    }

    @Test func plainHTTPOnLoopbackIsAllowedInTestMode() throws {
        for issuer in ["http://127.0.0.1:9000", "http://127.1.2.3", "http://localhost:8080/realm", "http://[::1]:9000"] {
            _ = try ProviderConfiguration.openIDConnect(name: "corp", issuer: issuer, clientIDs: ["web"], allowInsecureLoopback: true)
        }
    }

    @Test func otherSchemesAndRelativeAddressesAreRefused() {
        for issuer in ["ftp://login.example.com", "login.example.com", "https://login.example.com?tenant=1", ""] {
            #expect(throws: ProviderConfigurationError.self, "\(issuer)") {
                try ProviderConfiguration.openIDConnect(name: "corp", issuer: issuer, clientIDs: ["web"], allowInsecureLoopback: true)
            }
        }
    }

    @Test func providerNamesAreDistinct() throws {
        let google = try ProviderConfiguration.google(clientIDs: ["a"])
        #expect(throws: ProviderConfigurationError.self) { try IDTokenVerifier(providers: [google, google]) }
        let apple = try ProviderConfiguration.apple(clientIDs: ["b"])
        let verifier = try IDTokenVerifier(providers: [google, apple])
        #expect(verifier.providerNames == ["apple", "google"])
    }

    @Test func errorCodesAndReasonsAreStable() {
        #expect(ProviderTokenError.invalidToken(.expired).code == "invalid_provider_token")
        #expect(ProviderTokenError.providerUnavailable(provider: "apple", detail: "x").code == "provider_unavailable")
        #expect(ProviderTokenError.unknownProvider("x").code == "unknown_provider")
        #expect(
            InvalidProviderTokenReason.allCases.map(\.rawValue) == [
                "malformed", "algorithm_not_allowed", "missing_kid", "unknown_kid", "key_algorithm_mismatch", "bad_signature",
                "wrong_issuer", "wrong_audience", "expired", "issued_in_future", "missing_claim", "nonce_mismatch", "nonce_missing",
                "unexpected_nonce", "replayed",
            ])
        #expect(InvalidProviderTokenReason.allCases.allSatisfy { !$0.message.isEmpty })
    }

    @Test func replayGuardStaysBounded() {
        let guardian = ReplayGuard(capacity: 100)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        for index in 0..<1_000 {
            #expect(guardian.accept("id-\(index)", until: now.addingTimeInterval(600 + Double(index)), now: now))
            #expect(guardian.count <= 100)
        }
        // The latest ids are still remembered; once expired, an id may be used again.
        #expect(!guardian.accept("id-999", until: now.addingTimeInterval(2_000), now: now))
        #expect(guardian.accept("id-999", until: now.addingTimeInterval(3_000), now: now.addingTimeInterval(1_600)))
    }
}
