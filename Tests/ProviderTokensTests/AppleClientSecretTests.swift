import Crypto
import _CryptoExtras
import Foundation
import GatehouseSupport
import GatehouseTestSupport
import ProviderTestSupport
import ProviderTokens
import Testing

/// The client secret of Apple's token endpoint: its header, claims and signature, and its cache
/// on the injected clock.
@Suite("Sign in with Apple: the client secret")
struct AppleClientSecretTests {
    static func maker(clock: ManualClock, lifetime: TimeInterval = 86_400, renewBefore: TimeInterval = 3_600) throws -> AppleClientSecret {
        try AppleClientSecret(
            teamID: AppleHarness.teamID, keyID: AppleHarness.keyID, clientIDs: ClientIDs.apple, privateKeyPEM: AppleHarness.teamKeyPEM,
            lifetime: lifetime, renewBefore: renewBefore, clock: clock.wallClock)
    }

    @Test func headerClaimsAndSignature() throws {
        #expect(AppleHarness.teamKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"), "the .p8 form: PKCS#8")
        let clock = ManualClock()
        let secret = try Self.maker(clock: clock).secret(for: AppleHarness.services)
        let header = try jwsSegment(secret, 0)
        #expect(header["alg"] as? String == "ES256")
        #expect(header["kid"] as? String == AppleHarness.keyID)
        let claims = try jwsSegment(secret, 1)
        #expect(claims["iss"] as? String == AppleHarness.teamID)
        #expect(claims["sub"] as? String == AppleHarness.services)
        #expect(claims["aud"] as? String == "https://appleid.apple.com")
        #expect(claims["iat"] as? Int == Int(clock.now.timeIntervalSince1970))
        #expect(claims["exp"] as? Int == Int(clock.now.timeIntervalSince1970) + 86_400)
        #expect(Set(claims.keys) == ["iss", "sub", "aud", "iat", "exp"])
        // ES256 as JWS wants it: r ‖ s over `header.claims`, verified with the team's public key.
        let parts = secret.split(separator: ".").map(String.init)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(Base64URL.decode(parts[2])))
        #expect(AppleHarness.teamKey.publicKey.isValidSignature(signature, for: SHA256.hash(data: Data((parts[0] + "." + parts[1]).utf8))))
        #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: SHA256.hash(data: Data((parts[0] + "." + parts[1]).utf8))))
    }

    @Test func theSecretIsCachedUntilNearItsExpiryThenRenewed() throws {
        let clock = ManualClock()
        let maker = try Self.maker(clock: clock)
        let first = try maker.secret(for: AppleHarness.services)
        clock.advance(by: 3_600)
        #expect(try maker.secret(for: AppleHarness.services) == first)
        clock.advance(by: 86_400 - 3_600 - 3_600 - 1)  // 1 s before the renewal margin
        #expect(try maker.secret(for: AppleHarness.services) == first)
        clock.advance(by: 1)
        let second = try maker.secret(for: AppleHarness.services)
        #expect(second != first)
        #expect(try jwsSegment(second, 1)["iat"] as? Int == Int(clock.now.timeIntervalSince1970))
        #expect(try maker.secret(for: AppleHarness.services) == second)
        // Each client id has its own secret (its sub).
        let ios = try maker.secret(for: ClientIDs.apple[0])
        #expect(try jwsSegment(ios, 1)["sub"] as? String == ClientIDs.apple[0])
        // A clock set back before the secret's iat gets a new one (Apple would refuse an iat in the future).
        clock.advance(by: -7_200)
        #expect(try maker.secret(for: AppleHarness.services) != second)
    }

    @Test func aSecretForAnotherClientIsRefused() throws {
        let maker = try Self.maker(clock: ManualClock())
        #expect(throws: ProviderConfigurationError.self) { try maker.secret(for: "com.example.other") }
    }

    @Test func unusableConfigurationsAreRefusedWithoutShowingTheKey() throws {
        let pem = AppleHarness.teamKeyPEM
        guard case .rsa(let rsa) = TestSigningKey.rsa1.material else { throw CancellationError() }
        let cases: [(String, [String], String, TimeInterval, TimeInterval)] = [
            ("", ["c"], pem, 86_400, 3_600),  // no team id
            ("T", [""], pem, 86_400, 3_600),  // no client id
            ("T", ["c"], pem, 15_777_001, 3_600),  // more than 180 days
            ("T", ["c"], pem, 600, 600),  // renewed before it is made
            ("T", ["c"], String(pem.dropLast(40)), 86_400, 3_600),  // a damaged PEM
            ("T", ["c"], rsa.pemRepresentation, 86_400, 3_600),  // not a P-256 key
        ]
        for (team, clients, key, lifetime, margin) in cases {
            let error = #expect(throws: ProviderConfigurationError.self) {
                try AppleClientSecret(teamID: team, keyID: "K", clientIDs: clients, privateKeyPEM: key, lifetime: lifetime, renewBefore: margin)
            }
            #expect(error.map { !$0.message.contains("MI") } ?? false, "\(String(describing: error))")
        }
    }

    @Test func theDescriptionShowsNeitherTheKeyNorASecret() throws {
        let maker = try Self.maker(clock: ManualClock())
        let secret = try maker.secret(for: AppleHarness.services)
        for text in [String(describing: maker), String(reflecting: maker), "\(maker)"] {
            #expect(!text.contains(secret))
            #expect(!text.contains(String(AppleHarness.teamKeyPEM.split(separator: "\n")[1])))
        }
    }
}

