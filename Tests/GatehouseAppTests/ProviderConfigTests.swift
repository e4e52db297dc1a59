import Foundation
import ProviderTokens
import Testing
@testable import GatehouseApp

/// The provider keys (issue 20): which providers they turn on, and what they refuse.
@Suite("Provider configuration")
struct ProviderConfigTests {
    @Test("Apple, Google and an OpenID Connect provider by their keys, with the ids the API uses")
    func providers() throws {
        let config = try Config(environment: [
            "GATEHOUSE_APPLE_CLIENT_IDS": "com.example.app, com.example.web",
            "GATEHOUSE_GOOGLE_CLIENT_IDS": "1-ios.apps.googleusercontent.com",
            "GATEHOUSE_OIDC_PROVIDERS": "corp|https://login.corp.example|web-a,web-b; other|https://id.other.example|x",
            "GATEHOUSE_PROVIDER_KEY_REFETCH_INTERVAL": "30",
        ])
        let (providers, options) = try IdentityRoleSettings.providers(config)
        #expect(providers.map(\.name) == ["apple.com", "google.com", "oidc.corp", "oidc.other"])
        #expect(providers[0].clientIDs == ["com.example.app", "com.example.web"])
        #expect(providers[0].nonceForm == .sha256Hex)
        #expect(providers[2].issuers == ["https://login.corp.example"])
        #expect(providers[2].clientIDs == ["web-a", "web-b"])
        #expect(options.cachePolicy.unknownKeyRefetchInterval == 30)
        #expect(try IdentityRoleSettings.providers(Config(environment: [:])).0.isEmpty)
    }

    @Test("plain http outside test mode, a malformed OIDC entry, half of Apple's server-side keys, and the team key without client ids are refused with what to fix")
    func refusals() throws {
        for environment in [
            ["GATEHOUSE_GOOGLE_CLIENT_IDS": "x", "GATEHOUSE_GOOGLE_JWKS_URL": "http://127.0.0.1:9/jwks"],
            ["GATEHOUSE_OIDC_PROVIDERS": "Corp Name|https://login.example|x"],
            ["GATEHOUSE_OIDC_PROVIDERS": "corp|https://login.example"],
        ] {
            #expect(throws: ConfigError.self) { try IdentityRoleSettings.providers(Config(environment: environment)) }
        }
        let loopback = try Config(environment: [
            "GATEHOUSE_GOOGLE_CLIENT_IDS": "x", "GATEHOUSE_GOOGLE_JWKS_URL": "http://127.0.0.1:9/jwks",
            "GATEHOUSE_PROVIDERS_INSECURE_LOOPBACK": "true",
        ])
        #expect(try IdentityRoleSettings.providers(loopback).0.count == 1)
        let half = try Config(environment: ["GATEHOUSE_APPLE_CLIENT_IDS": "a", "GATEHOUSE_APPLE_TEAM_ID": "T"])
        let error = #expect(throws: ConfigError.self) { try IdentityRoleSettings.appleServer(half, dataDir: "/nonexistent") }
        #expect(error?.message.contains("GATEHOUSE_APPLE_KEY_ID") == true)
        let noClients = try Config(environment: [
            "GATEHOUSE_APPLE_TEAM_ID": "T", "GATEHOUSE_APPLE_KEY_ID": "K", "GATEHOUSE_APPLE_PRIVATE_KEY_FILE": "/nonexistent",
        ])
        #expect(throws: ConfigError.self) { try IdentityRoleSettings.appleServer(noClients, dataDir: "/nonexistent") }
        #expect(try IdentityRoleSettings.appleServer(Config(environment: [:]), dataDir: "/nonexistent") == nil)
    }
}
