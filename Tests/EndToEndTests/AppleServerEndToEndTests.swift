import Crypto
import Foundation
import GatehouseSupport
import GatehouseTestSupport
import ProviderTestSupport
import Testing

/// Sign in with Apple's server side (issue 20 §4) over three processes against the fake's
/// Apple-like token, revocation and notification endpoints.
@Suite("Sign in with Apple's server side over three processes")
struct AppleServerEndToEndTests {
    static let teamID = "TEAM123456"
    static let keyID = "KEY7654321"

    /// A provider stack whose identity service has the team key, with the fake's Apple endpoints.
    static func start() async throws -> (ProviderStack, P256.Signing.PrivateKey) {
        let teamKey = P256.Signing.PrivateKey()
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("gh-apple-\(UUID().uuidString).p8")
        try Data(teamKey.pemRepresentation.utf8).write(to: keyFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        // The endpoints' base is known only once the fake runs: start it through ProviderStack.
        var base = ""
        let p = try await ProviderStack.start { fakeBase in
            base = fakeBase
            return [
                "GATEHOUSE_APPLE_TEAM_ID": teamID, "GATEHOUSE_APPLE_KEY_ID": keyID, "GATEHOUSE_APPLE_PRIVATE_KEY_FILE": keyFile.path,
                "GATEHOUSE_APPLE_TOKEN_URL": fakeBase + "/auth/token", "GATEHOUSE_APPLE_REVOKE_URL": fakeBase + "/auth/revoke",
            ]
        }
        #expect(!base.isEmpty)
        p.fake.apple.register(.init(teamID: teamID, keyID: keyID, publicKey: teamKey.publicKey, clientIDs: [ProviderStack.appleClient, "com.example.services"]))
        p.fake.apple.set(clock: p.stack.clock.clock)
        return (p, teamKey)
    }

    @Test("the authorization code is exchanged at sign-in; deleting the account revokes Apple's refresh token at Apple (from the queue, after the answer); a refused code changes nothing")
    func exchangeAndRevokeOnDeletion() async throws {
        let (p, _) = try await Self.start()
        defer { Task { await p.stop() } }
        let refresh = p.fake.apple.register(code: "code-1", clientID: ProviderStack.appleClient, subject: "a-del")
        let signIn = try await p.signIn([
            "provider": "apple.com", "idToken": p.apple("a-del", rawNonce: "n", email: "del@privaterelay.appleid.com"), "nonce": "n",
            "authorizationCode": "code-1",
        ])
        #expect(signIn.status == 200, "\(signIn.json)")
        #expect(p.fake.apple.tokenRequests == 1)
        let access = try p.access(signIn)

        // A used code is refused by Apple: the sign-in is refused and creates nobody.
        let before = try await p.userCount()
        let reused = try await p.signIn([
            "provider": "apple.com", "idToken": p.apple("a-other", rawNonce: "m"), "nonce": "m", "authorizationCode": "code-1",
        ])
        #expect(reused.status == 401)
        #expect(reused.json["reason"] as? String == "invalid_authorization_code")
        #expect(try await p.userCount() == before)

        // Web Sign in with Apple: the code is the services id's, exchanged with its redirect_uri.
        p.fake.apple.register(code: "web-1", clientID: "com.example.services", subject: "a-web", redirectURI: "https://app.example.com/cb")
        let webToken = p.apple("a-web", rawNonce: "w", extra: ["aud": "com.example.services"])
        let wrongRedirect = try await p.signIn([
            "provider": "apple.com", "idToken": webToken, "nonce": "w", "authorizationCode": "web-1",
            "redirectURI": "https://evil.example.com/cb",
        ])
        #expect(wrongRedirect.json["reason"] as? String == "invalid_authorization_code")
        p.fake.apple.register(code: "web-2", clientID: "com.example.services", subject: "a-web", redirectURI: "https://app.example.com/cb")
        let web = try await p.signIn([
            "provider": "apple.com", "idToken": p.apple("a-web", rawNonce: "w2", extra: ["aud": "com.example.services"]), "nonce": "w2",
            "authorizationCode": "web-2", "redirectURI": "https://app.example.com/cb",
        ])
        #expect(web.status == 200, "\(web.json)")

        // Deletion answers at once; the worker revokes the token at Apple.
        let deleted = try await p.stack.request("DELETE", "/v1/me", bearer: access)
        #expect(deleted.status == 200 || deleted.status == 204, "\(deleted.json)")
        try await waitUntil("the revocation at Apple") { p.fake.apple.revocations.map(\.token) == [refresh] }
        #expect(p.fake.apple.revocations.first?.clientID == ProviderStack.appleClient)
        #expect(p.fake.apple.revocations.first?.tokenTypeHint == "refresh_token")
        // The token was never stored in the clear.
        let database = try Data(contentsOf: p.stack.dataDir.appendingPathComponent("identity.sqlite"))
        #expect(database.range(of: Data(refresh.utf8)) == nil)
    }

    @Test("Apple down at deletion: the deletion still answers; the revocation is retried later and succeeds once Apple is back")
    func revocationIsRetried() async throws {
        let (p, _) = try await Self.start()
        defer { Task { await p.stop() } }
        let refresh = p.fake.apple.register(code: "code-2", clientID: ProviderStack.appleClient, subject: "a-retry")
        let signIn = try await p.signIn([
            "provider": "apple.com", "idToken": p.apple("a-retry", rawNonce: "n"), "nonce": "n", "authorizationCode": "code-2",
        ])
        #expect(signIn.status == 200, "\(signIn.json)")
        p.fake.apple.set(revokeMode: .down)
        let deleted = try await p.stack.request("DELETE", "/v1/me", bearer: try p.access(signIn))
        #expect(deleted.status == 200 || deleted.status == 204)
        try await waitUntil("a failed attempt") { p.fake.apple.revokeRequests >= 1 }
        #expect(p.fake.apple.revocations.isEmpty)
        p.fake.apple.set(revokeMode: .up)
        // The worker schedules the retry 30 s after its failed attempt, on the stack's clock,
        // once Apple's answer is in: move the clock past it until the retry has gone.
        try await waitUntil("the retried revocation", interval: .milliseconds(100)) {
            p.stack.advanceClock(by: .seconds(31))
            return p.fake.apple.revocations.map(\.token) == [refresh]
        }
        #expect(p.fake.apple.revokeRequests >= 2)
    }

    @Test("notifications: consent-revoked unlinks Apple from a user with a password and ends its sessions; account-delete of a user with only Apple keeps the link and ends its sessions; a forged or replayed notification is 401")
    func notifications() async throws {
        let (p, _) = try await Self.start()
        defer { Task { await p.stop() } }
        let u = try await p.signUp("n@example.com")
        let linked = try await p.signIn(["provider": "apple.com", "idToken": p.apple("a-n", rawNonce: "n"), "nonce": "n"], bearer: u.access)
        #expect(try p.user(linked).json["providers"] as? [String] == ["apple.com", "password"])
        let body = p.fake.apple.notificationBody(type: "consent-revoked", audience: ProviderStack.appleClient, subject: "a-n")
        let r = try await p.stack.request("POST", "/v1/providers/apple/notifications", rawBody: body, headers: ["Content-Type": "application/json"])
        #expect(r.status == 200)
        #expect(try await p.stack.request("GET", "/v1/me", bearer: u.access).status == 401, "sessions end")
        let again = try await p.stack.request("POST", "/v1/sessions", json: ["email": "n@example.com", "password": ProviderStack.password])
        #expect(try p.user(again).json["providers"] as? [String] == ["password"])
        let replay = try await p.stack.request("POST", "/v1/providers/apple/notifications", rawBody: body, headers: ["Content-Type": "application/json"])
        #expect(replay.status == 401)
        #expect(replay.json["code"] as? String == "invalid_provider_token")

        let only = try await p.signIn(["provider": "apple.com", "idToken": p.apple("a-only", rawNonce: "o"), "nonce": "o"])
        let forged = p.fake.apple.notificationBody(
            type: "account-delete", audience: ProviderStack.appleClient, subject: "a-only", key: TestSigningKey.rogue)
        let refused = try await p.stack.request("POST", "/v1/providers/apple/notifications", rawBody: forged, headers: ["Content-Type": "application/json"])
        #expect(refused.status == 401)
        #expect(try await p.stack.request("GET", "/v1/me", bearer: try p.access(only)).status == 200, "a forged notification changes nothing")
        let delete = p.fake.apple.notificationBody(type: "account-delete", audience: ProviderStack.appleClient, subject: "a-only")
        let deleted = try await p.stack.request("POST", "/v1/providers/apple/notifications", rawBody: delete, headers: ["Content-Type": "application/json"])
        #expect(deleted.status == 200)
        #expect(try await p.stack.request("GET", "/v1/me", bearer: try p.access(only)).status == 401)
        let unknown = p.fake.apple.notificationBody(type: "email-disabled", audience: ProviderStack.appleClient, subject: "nobody")
        #expect(try await p.stack.request("POST", "/v1/providers/apple/notifications", rawBody: unknown, headers: ["Content-Type": "application/json"]).status == 200)
        let newType = p.fake.apple.notificationBody(type: "something-new", audience: ProviderStack.appleClient, subject: "a-n")
        #expect(try await p.stack.request("POST", "/v1/providers/apple/notifications", rawBody: newType, headers: ["Content-Type": "application/json"]).status == 200, "an unknown type is acknowledged, not retried forever")
    }

    @Test("a consent-revoked notification that could not be acted on (token service down) is not spent: Apple's retry of the same body is accepted and ends the sessions")
    func failedNotificationIsRetried() async throws {
        let (p, _) = try await Self.start()
        defer { Task { await p.stop() } }
        let u = try await p.signUp("retry@example.com")
        let linked = try await p.signIn(["provider": "apple.com", "idToken": p.apple("a-r", rawNonce: "n"), "nonce": "n"], bearer: u.access)
        let access = try p.access(linked)
        let body = p.fake.apple.notificationBody(type: "consent-revoked", audience: ProviderStack.appleClient, subject: "a-r")
        await p.stack.kill("token")
        let failed = try await p.stack.request("POST", "/v1/providers/apple/notifications", rawBody: body, headers: ["Content-Type": "application/json"])
        #expect(failed.status == 503, "\(failed.json)")
        try p.stack.start("token")
        // Back for the identity service, whose calls the notification makes (a refresh would show
        // only the gateway's way to it, which may reconnect first): a password sign-in issues a
        // session through the identity service.
        try await waitUntil("the token service back for the identity service") {
            try await p.stack.request("POST", "/v1/sessions", json: ["email": "retry@example.com", "password": ProviderStack.password]).status == 200
        }
        let retried = try await p.stack.request("POST", "/v1/providers/apple/notifications", rawBody: body, headers: ["Content-Type": "application/json"])
        #expect(retried.status == 200, "\(retried.json)")
        #expect(try await p.stack.request("GET", "/v1/me", bearer: access).status == 401)
    }
}
