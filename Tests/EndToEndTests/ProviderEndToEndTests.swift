import Crypto
import Foundation
import GatehouseSupport
import GatehouseTestSupport
import ProviderTestSupport
import Testing

/// A stack whose identity service trusts a fake OpenID provider served over real HTTP by the
/// test: `apple.com` and `google.com` with their real issuers (only claims) and the fake's keys,
/// and `oidc.corp`, whose issuer is the fake (found by discovery).
struct ProviderStack {
    static let appleIssuer = "https://appleid.apple.com"
    static let googleIssuer = "https://accounts.google.com"
    static let appleClient = "com.example.ios"
    static let googleClient = "123-ios.apps.googleusercontent.com"
    static let corpClient = "gatehouse-web"
    static let password = "correct horse battery"

    let stack: Stack
    let fake: FakeOpenIDProvider
    let base: String

    /// Starts the fake provider and the three roles configured for it.
    static func start(identityEnvironment: (String) throws -> [String: String] = { _ in [:] }) async throws -> ProviderStack {
        let (fake, base) = try await FakeOpenIDProvider.start()
        let stack = Stack()
        do {
            var env = [
                "GATEHOUSE_APPLE_CLIENT_IDS": "\(appleClient),com.example.services",
                "GATEHOUSE_APPLE_JWKS_URL": base + "/jwks",
                "GATEHOUSE_GOOGLE_CLIENT_IDS": "123-web.apps.googleusercontent.com, \(googleClient)",
                "GATEHOUSE_GOOGLE_JWKS_URL": base + "/jwks",
                "GATEHOUSE_OIDC_PROVIDERS": "corp|\(base)|\(corpClient)",
                "GATEHOUSE_PROVIDERS_INSECURE_LOOPBACK": "true",
                "GATEHOUSE_PROVIDER_FETCH_TIMEOUT_MS": "500",
            ]
            env.merge(try identityEnvironment(base)) { _, new in new }
            try stack.start("identity", environment: env)
            try stack.start("token")
            try stack.start("gateway")
            try await stack.waitReady()
        } catch {
            stack.stopAll()
            await fake.stop()
            throw error
        }
        return ProviderStack(stack: stack, fake: fake, base: base)
    }

    func stop() async {
        stack.stopAll()
        await fake.stop()
    }

    /// The stack's time (its processes read the system time plus the test's offset).
    var now: Date { stack.clock.clock.now }

    /// A Google ID token for `subject` (a fresh `jti`: never a replay unless sent twice).
    func google(_ subject: String, email: String? = nil, verified: Bool = true, nonce: String? = nil, extra: [String: Any] = [:]) -> String {
        var claims = standardClaims(issuer: Self.googleIssuer, audience: Self.googleClient, now: now, subject: subject, extra: extra)
        claims["jti"] = UUID().uuidString
        if let email { claims["email"] = email; claims["email_verified"] = verified }
        if let nonce { claims["nonce"] = nonce }
        return TestSigningKey.rsa1.idToken(claims: claims)
    }

    /// An Apple ID token for `subject` carrying SHA-256(`rawNonce`) in hex, Apple's string booleans.
    func apple(_ subject: String, rawNonce: String, email: String? = nil, extra: [String: Any] = [:]) -> String {
        var claims = standardClaims(issuer: Self.appleIssuer, audience: Self.appleClient, now: now, subject: subject)
        claims["jti"] = UUID().uuidString
        claims["nonce"] = sha256Hex(rawNonce)
        if let email { claims["email"] = email; claims["email_verified"] = "true"; claims["is_private_email"] = "true" }
        for (k, v) in extra { claims[k] = v }
        return TestSigningKey.ec1.idToken(claims: claims)
    }

    /// `POST /v1/sessions/provider`.
    func signIn(_ body: [String: Any], bearer: String? = nil) async throws -> Stack.Response {
        try await stack.request("POST", "/v1/sessions/provider", json: body, bearer: bearer)
    }

    func signUp(_ email: String) async throws -> (id: String, access: String) {
        let r = try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": Self.password])
        #expect(r.status == 201)
        return (try user(r).id, try access(r))
    }

    func anonymous() async throws -> (id: String, access: String, refresh: String) {
        let r = try await stack.request("POST", "/v1/accounts/anonymous")
        #expect(r.status == 201)
        let session = try #require(r.json["session"] as? [String: Any])
        return (try user(r).id, try access(r), try #require(session["refreshToken"] as? String))
    }

    func user(_ r: Stack.Response) throws -> (id: String, json: [String: Any]) {
        let user = try #require(r.json["user"] as? [String: Any], "no user in \(r.status) \(r.json)")
        return (try #require(user["id"] as? String), user)
    }

    func access(_ r: Stack.Response) throws -> String {
        try #require((r.json["session"] as? [String: Any])?["accessToken"] as? String, "no session in \(r.status) \(r.json)")
    }

    func me(_ access: String) async throws -> [String: Any] {
        let r = try await stack.request("GET", "/v1/me", bearer: access)
        #expect(r.status == 200)
        return r.json
    }

    func userCount() async throws -> Int {
        let r = try await stack.request("GET", "/admin/v1/users?limit=1000", bearer: try await stack.adminKey(), port: stack.adminPort)
        return (r.json["users"] as? [Any])?.count ?? -1
    }
}

/// SHA-256 of `text` in lowercase hex (Apple's form of the nonce in its tokens).
func sha256Hex(_ text: String) -> String {
    SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
}

/// Issue 20 over HTTP against three processes: seed 002's five cases and scenarios A11–A13,
/// A16–A18, A21, A22, linking, unlinking, re-authentication, and the attacks.
@Suite("Provider sign-in over three processes")
struct ProviderEndToEndTests {
    @Test("a Google user imported from a Firebase export (its rawId) signs in with Google as the same user, by its Firebase uid, without email_exists")
    func importedGoogleUserSignsIn() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let file = p.stack.dataDir.appendingPathComponent("firebase.json")
        try Data((#"{"users":[{"localId":"fbGoogleOnlyLocalId0000001","email":"gina@example.com","emailVerified":true,"#
            + #""providerUserInfo":[{"providerId":"google.com","rawId":"g-gina","email":"gina@example.com"}]}]}"#).utf8).write(to: file)
        let imported = try await runUsersCommand(p.stack, ["import", file.path, "--format", "firebase"])
        #expect(imported.status == 0 && imported.stdout == "created 1, updated 0, skipped 0, failed 0\n", "\(imported.stdout)\(imported.stderr)")
        let signedIn = try await p.signIn(["provider": "google.com", "idToken": p.google("g-gina", email: "gina@example.com")])
        #expect(signedIn.status == 200, "\(signedIn.json)")
        let (id, user) = try p.user(signedIn)
        #expect(id == "fbGoogleOnlyLocalId0000001" && user["providers"] as? [String] == ["google.com"])
        #expect(jwtClaims(try p.access(signedIn))["sub"] as? String == "fbGoogleOnlyLocalId0000001")
        // The export carries the identity, so it imports again elsewhere.
        let exported = try await runUsersCommand(p.stack, ["export"])
        #expect(exported.stdout.contains(#""identities":[{"provider":"google.com","subject":"g-gina"}]"#), "\(exported.stdout)")
    }

    @Test("A11: Google first sign-in creates the user (email from the token, providers [google.com], amr google.com); a second sign-in with a new token for the same subject finds it; a generic OIDC provider by discovery works alike")
    func googleFirstAndSecond() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let first = try await p.signIn(["provider": "google.com", "idToken": p.google("g-ann", email: "Ann@Example.com")])
        #expect(first.status == 200, "\(first.json)")
        let (id, user) = try p.user(first)
        #expect(user["providers"] as? [String] == ["google.com"])
        #expect(user["email"] as? String == "Ann@Example.com")
        #expect(user["emailVerified"] as? Bool == true)
        #expect(user["isAnonymous"] as? Bool == false)
        let access = try p.access(first)
        #expect(jwtClaims(access)["amr"] as? [String] == ["google.com"])
        #expect(jwtClaims(access)["sub"] as? String == id)

        let second = try await p.signIn(["provider": "google.com", "idToken": p.google("g-ann", email: "Ann@Example.com")])
        #expect(second.status == 200)
        #expect(try p.user(second).id == id)
        #expect(try await p.me(try p.access(second))["providers"] as? [String] == ["google.com"])

        // oidc.corp: keys found through the fake's discovery document; no email in the token.
        var claims = standardClaims(issuer: p.base, audience: ProviderStack.corpClient, now: p.now, subject: "corp-1")
        claims["jti"] = UUID().uuidString
        let corp = try await p.signIn(["provider": "oidc.corp", "idToken": TestSigningKey.rsa1.idToken(claims: claims)])
        #expect(corp.status == 200, "\(corp.json)")
        let corpUser = try p.user(corp).json
        #expect(corpUser["providers"] as? [String] == ["oidc.corp"])
        #expect(corpUser["email"] is NSNull || corpUser["email"] == nil)
        #expect(p.fake.discoveryFetches == 1)
    }

    @Test("Ten concurrent first sign-ins of one new identity (ten tokens) all answer 200 with one and the same new user")
    func concurrentFirstSignIns() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let tokens = (0..<10).map { _ in p.google("g-race", email: "race@example.com") }
        let ids = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for token in tokens {
                group.addTask {
                    let r = try await p.signIn(["provider": "google.com", "idToken": token])
                    return (r.status, (r.json["user"] as? [String: Any])?["id"] as? String)
                }
            }
            var all: [(Int, String?)] = []
            for try await one in group { all.append(one) }
            return all
        }
        #expect(ids.allSatisfy { $0.0 == 200 }, "\(ids)")
        #expect(Set(ids.compactMap(\.1)).count == 1)
        #expect(try await p.userCount() == 1)
    }

    @Test("A12 and A13: Apple's nonce is checked as SHA-256(raw); the supplied full name is set on the first sign-in and kept by a later one without it; a replayed token is refused; a provider user id without a token is refused and creates nobody")
    func appleNonceNameReplayAndBareIDs() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let token = p.apple("a-bob", rawNonce: "nonce-1", email: "x1@privaterelay.appleid.com")
        let wrong = try await p.signIn(["provider": "apple.com", "idToken": token, "nonce": "another-nonce"])
        #expect(wrong.status == 401)
        #expect(wrong.json["code"] as? String == "invalid_provider_token")
        #expect(wrong.json["reason"] as? String == "nonce_mismatch")
        let hashed = try await p.signIn(["provider": "apple.com", "idToken": token, "nonce": sha256Hex("nonce-1")])
        #expect(hashed.json["reason"] as? String == "nonce_mismatch", "the hash instead of the raw nonce is refused")

        let first = try await p.signIn([
            "provider": "apple.com", "idToken": token, "nonce": "nonce-1", "fullName": ["givenName": "Bob", "familyName": "Builder"],
        ])
        #expect(first.status == 200, "\(first.json)")
        let (id, user) = try p.user(first)
        #expect(user["displayName"] as? String == "Bob Builder")
        #expect(user["email"] as? String == "x1@privaterelay.appleid.com")
        #expect(user["emailVerified"] as? Bool == true)
        #expect(user["providers"] as? [String] == ["apple.com"])

        let replay = try await p.signIn(["provider": "apple.com", "idToken": token, "nonce": "nonce-1"])
        #expect(replay.status == 401)
        #expect(replay.json["reason"] as? String == "replayed")

        let second = try await p.signIn(["provider": "apple.com", "idToken": p.apple("a-bob", rawNonce: "nonce-2"), "nonce": "nonce-2"])
        #expect(second.status == 200)
        #expect(try p.user(second).id == id)
        #expect(try p.user(second).json["displayName"] as? String == "Bob Builder")

        let before = try await p.userCount()
        for body: [String: Any] in [
            ["provider": "google.com", "providerUserId": "g-ann", "email": "ann@example.com"],
            ["provider": "apple.com", "oauth_id": "a-bob", "idToken": ""],
        ] {
            let bare = try await p.signIn(body)
            #expect(bare.status == 422, "\(bare.json)")
            #expect(bare.json["code"] as? String == "invalid_argument")
        }
        let unknown = try await p.signIn(["provider": "facebook.com", "idToken": p.google("g-1")])
        #expect(unknown.status == 400)
        #expect(unknown.json["code"] as? String == "unknown_provider")
        #expect(try await p.userCount() == before)
    }

    @Test("Attacks: wrong audience, wrong issuer, expired, future iat, alg none, HS256 keyed with the public key, a forged signature and an unknown kid are 401 with their reason; a rotated key is picked up; a down or hanging provider answers 503 provider_unavailable within the deadline")
    func attacks() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let now = p.now
        func claims(_ extra: [String: Any] = [:]) -> [String: Any] {
            var c = standardClaims(issuer: ProviderStack.googleIssuer, audience: ProviderStack.googleClient, now: now, subject: "g-attack")
            c["jti"] = UUID().uuidString
            for (k, v) in extra { c[k] = v }
            return c
        }
        let cases: [(String, String)] = [
            (TestSigningKey.rsa1.idToken(claims: claims(["aud": "someone-else"])), "wrong_audience"),
            (TestSigningKey.rsa1.idToken(claims: claims(["iss": "https://evil.example"])), "wrong_issuer"),
            (TestSigningKey.rsa1.idToken(claims: claims(["exp": Int(now.timeIntervalSince1970) - 600, "iat": Int(now.timeIntervalSince1970) - 1200])), "expired"),
            (TestSigningKey.rsa1.idToken(claims: claims(["iat": Int(now.timeIntervalSince1970) + 3600, "exp": Int(now.timeIntervalSince1970) + 7200])), "issued_in_future"),
            (TestTokens.unsigned(claims(), kid: "rsa-1"), "algorithm_not_allowed"),
            (TestTokens.hmac(claims(), kid: "rsa-1", secret: Data(TestSigningKey.rsa1.publicKeyPEM.utf8)), "algorithm_not_allowed"),
            (TestSigningKey.rogue.idToken(claims: claims()), "bad_signature"),
            (TestSigningKey.rsa2.idToken(claims: claims()), "unknown_kid"),
        ]
        for (token, reason) in cases {
            let r = try await p.signIn(["provider": "google.com", "idToken": token])
            #expect(r.status == 401, "\(reason): \(r.json)")
            #expect(r.json["code"] as? String == "invalid_provider_token")
            #expect(r.json["reason"] as? String == reason)
            #expect(!(r.json["detail"] as? String ?? "").contains(token.prefix(20)))
        }
        #expect(try await p.userCount() == 0)

        // A rotation: the unknown kid was refetched once already; past the interval it is again.
        p.fake.publish([.rsa2, .ec1])
        p.stack.advanceClock(by: .seconds(61))
        var rotated = claims()
        rotated["iat"] = Int(p.now.timeIntervalSince1970)
        rotated["exp"] = Int(p.now.timeIntervalSince1970) + 600
        let ok = try await p.signIn(["provider": "google.com", "idToken": TestSigningKey.rsa2.idToken(claims: rotated)])
        #expect(ok.status == 200, "\(ok.json)")

        // The provider goes down and its cached keys expire: 503 within the fetch deadline.
        p.fake.set(mode: .hang)
        p.stack.advanceClock(by: .seconds(2 * 86_400))
        var late = claims()
        late["iat"] = Int(p.now.timeIntervalSince1970)
        late["exp"] = Int(p.now.timeIntervalSince1970) + 600
        let started = ContinuousClock.now
        let down = try await p.signIn(["provider": "google.com", "idToken": TestSigningKey.rsa2.idToken(claims: late)])
        #expect(down.status == 503, "\(down.json)")
        #expect(down.json["code"] as? String == "provider_unavailable")
        #expect(ContinuousClock.now - started < .seconds(2))
    }
}
