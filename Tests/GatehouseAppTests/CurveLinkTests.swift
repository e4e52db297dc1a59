import Foundation
import GatehouseContracts
import GatehouseTestSupport
import GatehouseRPC
import IdentityCore
import Logging
import Testing
import TokenCore
import TokenService
import ZeroMQ
@testable import GatehouseApp
import RPCRouting

@Suite("CURVE service links: configuration, key sets, roles")
struct CurveLinkTests {
    /// A fresh key set from `gatehouse keys generate` in a temporary folder.
    static func keySet() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gh-keys-\(UUID().uuidString)")
        try KeySet.generate(into: dir, force: false)
        return dir
    }

    /// The identity, token and gateway key pairs of the key set in `keys`.
    static func pairs(_ keys: URL) throws -> (identity: CurveKeyPair, token: CurveKeyPair, gateway: CurveKeyPair) {
        func pair(_ role: String) throws -> CurveKeyPair {
            let file = keys.appendingPathComponent("\(role).key")
            let text = try String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            return try CurveKeyPair(secretKey: #require(Z85.decodeKey(text)))
        }
        return (try pair("identity"), try pair("token"), try pair("gateway"))
    }

    static func mode(_ url: URL) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    static func message(_ body: () throws -> Void) -> String? {
        do { try body() } catch let error as ConfigError { return error.message } catch { return "\(error)" }
        return nil
    }

    @Test("keys generate writes the key set with the right modes, allow lists that match, and refuses to overwrite")
    func generate() throws {
        let dir = try Self.keySet()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try Self.mode(dir) == 0o700)
        for file in KeySet.files {
            #expect(try Self.mode(dir.appendingPathComponent(file.name)) == Int(file.mode), "\(file.name)")
        }
        #expect(KeySet.files.filter { $0.mode == 0o600 }.map(\.name).sorted() == ["gateway.key", "identity.key", "key-encryption.key", "token.key"])
        func read(_ name: String) throws -> String {
            try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
        }
        func pair(_ role: String) throws -> CurveKeyPair {
            try CurveKeyPair(secretKey: #require(Z85.decodeKey(read("\(role).key").trimmingCharacters(in: .whitespacesAndNewlines))))
        }
        let identity = try pair("identity"), token = try pair("token"), gateway = try pair("gateway")
        #expect(try read("identity.pub").trimmingCharacters(in: .whitespacesAndNewlines) == identity.publicKeyZ85)
        let key = ConfigTable.curveAllowedKeysFile
        #expect(try LinkSecurity.parseKeys(read("identity.allow"), key: key, path: "x") == [token.publicKey, gateway.publicKey])
        #expect(try LinkSecurity.parseKeys(read("token.allow"), key: key, path: "x") == [identity.publicKey, gateway.publicKey])
        #expect(Data(base64Encoded: try read("key-encryption.key").trimmingCharacters(in: .whitespacesAndNewlines))?.count == 32)
        // The report names files and compose secrets, never key material.
        let report = KeySet.report(KeySet.files, directory: dir)
        for secret in ["identity_curve_key", "token_curve_key", "gateway_curve_key", "identity_curve_allow", "token_curve_allow", "identity_curve_pub", "token_curve_pub", "key_encryption_key"] {
            #expect(report.contains(secret))
        }
        #expect(!report.contains(identity.secretKeyZ85))

        let before = try read("identity.key")
        #expect(throws: KeySet.Error.self) { try KeySet.generate(into: dir, force: false) }
        #expect(try read("identity.key") == before)
        let keyEncryptionKey = try read("key-encryption.key")
        let rewritten = try KeySet.generate(into: dir, force: true)
        #expect(try read("identity.key") != before)
        #expect(try Self.mode(dir.appendingPathComponent("identity.key")) == 0o600)
        // Rotating the link keys never touches the key-encryption key (issue 35): replacing it
        // locked the token service out of its own signing keys.
        #expect(try read("key-encryption.key") == keyEncryptionKey)
        #expect(!rewritten.map(\.name).contains("key-encryption.key"))
        #expect(KeySet.report(rewritten, directory: dir).contains("key-encryption.key  kept as it was"))
    }

    @Test("configuration errors name the key: missing allow list or server key, malformed keys")
    func configErrors() throws {
        let dir = try Self.keySet()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = { (name: String) in dir.appendingPathComponent(name).path }
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("gh-unused").path
        func identity(_ env: [String: String]) -> String? {
            Self.message { _ = try IdentityRoleSettings(config: Config(environment: env.merging(["GATEHOUSE_DATA_DIR": data]) { a, _ in a })) }
        }
        // A secret key without an allow list.
        let noAllow = identity(["GATEHOUSE_CURVE_SECRET_KEY_FILE": path("identity.key"), "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE": path("token.pub")])
        #expect(noAllow?.contains("GATEHOUSE_CURVE_ALLOWED_KEYS_FILE") == true)
        // Without the token's public key.
        let noPub = identity(["GATEHOUSE_CURVE_SECRET_KEY_FILE": path("identity.key"), "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE": path("identity.allow")])
        #expect(noPub?.contains("GATEHOUSE_TOKEN_PUBLIC_KEY_FILE") == true)
        // A malformed line in the allow list.
        let bad = dir.appendingPathComponent("bad.allow")
        try "# ok\n\(try CurveKeyPair.generate().publicKeyZ85)  # fine\nnot-a-key\n".write(to: bad, atomically: true, encoding: .utf8)
        let badLine = identity([
            "GATEHOUSE_CURVE_SECRET_KEY_FILE": path("identity.key"), "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE": bad.path,
            "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE": path("token.pub"),
        ])
        #expect(badLine?.contains("GATEHOUSE_CURVE_ALLOWED_KEYS_FILE") == true)
        #expect(badLine?.contains("line 3") == true)
        // A malformed secret key; its file's content never appears in the message.
        let badSecret = dir.appendingPathComponent("bad.key")
        try "tooShort-s3cret".write(to: badSecret, atomically: true, encoding: .utf8)
        let secretMessage = identity([
            "GATEHOUSE_CURVE_SECRET_KEY_FILE": badSecret.path, "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE": path("identity.allow"),
            "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE": path("token.pub"),
        ])
        #expect(secretMessage?.contains("GATEHOUSE_CURVE_SECRET_KEY_FILE") == true)
        #expect(secretMessage?.contains("tooShort-s3cret") == false)
        // The gateway needs both servers' keys but no allow list.
        let gatewayMessage = Self.message {
            _ = try GatewayRoleSettings(config: Config(environment: [
                "GATEHOUSE_CURVE_SECRET_KEY_FILE": path("gateway.key"), "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE": path("token.pub"),
            ]))
        }
        #expect(gatewayMessage?.contains("GATEHOUSE_IDENTITY_PUBLIC_KEY_FILE") == true)
        let gateway = try GatewayRoleSettings(config: Config(environment: [
            "GATEHOUSE_CURVE_SECRET_KEY_FILE": path("gateway.key"), "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE": path("token.pub"),
            "GATEHOUSE_IDENTITY_PUBLIC_KEY_FILE": path("identity.pub"),
        ]))
        #expect(gateway.links.curve?.identityServerKey != nil && gateway.links.curve?.tokenServerKey != nil)
        #expect(gateway.links.warnings.isEmpty)
    }

    @Test("plain tcp: refused (loopback too) unless GATEHOUSE_ALLOW_PLAINTEXT, then warned loudly; silent on inproc")
    func plaintextPolicy() throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("gh-unused").path
        let wide = ["GATEHOUSE_DATA_DIR": data, "GATEHOUSE_IDENTITY_BIND": "tcp://0.0.0.0:7001"]
        let refused = Self.message { _ = try IdentityRoleSettings(config: Config(environment: wide)) }
        #expect(refused?.contains("GATEHOUSE_CURVE_SECRET_KEY_FILE") == true)
        #expect(refused?.contains("GATEHOUSE_ALLOW_PLAINTEXT") == true)
        #expect(refused?.contains("GATEHOUSE_IDENTITY_BIND") == true)
        let star = Self.message { _ = try GatewayRoleSettings(config: Config(environment: ["GATEHOUSE_TOKEN_URL": "tcp://token:7011"])) }
        #expect(star?.contains("GATEHOUSE_IDENTITY_URL") == true, "the first tcp link without keys is named")

        let allowed = try IdentityRoleSettings(config: Config(environment: wide.merging(["GATEHOUSE_ALLOW_PLAINTEXT": "true"]) { a, _ in a }))
        #expect(allowed.links.curve == nil)
        #expect(allowed.links.warnings.contains { $0.contains("0.0.0.0") && $0.contains("PLAIN TEXT") })

        // Loopback without keys is refused too: any local process could call every method.
        let loopbackRefused = Self.message { _ = try IdentityRoleSettings(config: Config(environment: ["GATEHOUSE_DATA_DIR": data])) }
        #expect(loopbackRefused?.contains("loopback") == true && loopbackRefused?.contains("GATEHOUSE_ALLOW_PLAINTEXT=true") == true)
        let loopback = try IdentityRoleSettings(config: Config(environment: ["GATEHOUSE_DATA_DIR": data, "GATEHOUSE_ALLOW_PLAINTEXT": "true"]))
        #expect(loopback.links.warnings.count == 1)
        #expect(loopback.links.warnings.first?.contains("GATEHOUSE_TOKEN_URL tcp://127.0.0.1:7011") == true)
        #expect(loopback.links.warnings.first?.contains("PLAIN TEXT") == true)
        let serve = try IdentityRoleSettings(
            config: Config(environment: ["GATEHOUSE_DATA_DIR": data]),
            rpcBind: "inproc://identity", eventsBind: "inproc://identity-events", tokenURL: "inproc://token")
        #expect(serve.links.warnings.isEmpty)

        for endpoint in ["tcp://127.0.0.1:7001", "tcp://127.1.2.3:1", "tcp://localhost:7001", "tcp://[::1]:7001", "tcp://eth0;127.0.0.1:7001"] {
            #expect(LinkSecurity.isLoopback(endpoint), "\(endpoint)")
        }
        for endpoint in ["tcp://0.0.0.0:7001", "tcp://*:7001", "tcp://[::]:7001", "tcp://10.0.0.1:7001", "tcp://identity:7001", "tcp://127.0.0.1.evil.com:1", "tcp://eth0:7001"] {
            #expect(!LinkSecurity.isLoopback(endpoint), "\(endpoint)")
        }
    }

    @Test("the identity role with CURVE keys from a key set: the gateway's key is served, an unknown key is refused")
    func identityRoleOverCurve() async throws {
        let keys = try Self.keySet()
        defer { try? FileManager.default.removeItem(at: keys) }
        let path = { (name: String) in keys.appendingPathComponent(name).path }
        let (identityPair, tokenPair, gatewayPair) = try Self.pairs(keys)

        // A stand-in token service, itself a CURVE server that accepts the identity service.
        let router = FakeTokenService().router
        var tokenConfiguration = RPCServer.Configuration(endpoints: ["tcp://127.0.0.1:0"])
        tokenConfiguration.curve = CurveServerKeys(publicKey: tokenPair.publicKey, secretKey: tokenPair.secretKey, allowedClientKeys: [identityPair.publicKey])
        let tokenServer = try RPCServer(router: router, configuration: tokenConfiguration)
        let tokenEndpoint = try tokenServer.start()[0]

        let dataDir = try TemporaryDirectory(prefix: "gh-curve")
        defer { dataDir.remove() }
        let config = try Config(environment: [
            "GATEHOUSE_DATA_DIR": dataDir.path, "GATEHOUSE_ARGON2_MEMORY_KIB": "1024", "GATEHOUSE_ARGON2_ITERATIONS": "1",
            "GATEHOUSE_CURVE_SECRET_KEY_FILE": path("identity.key"), "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE": path("identity.allow"),
            "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE": path("token.pub"),
        ])
        let settings = try IdentityRoleSettings(config: config, rpcBind: "tcp://127.0.0.1:0", eventsBind: "tcp://127.0.0.1:0", tokenURL: tokenEndpoint)
        #expect(settings.links.curve != nil)
        #expect(settings.links.warnings.isEmpty)
        let role = try await IdentityRole.start(settings, logger: Logger(label: "test"))

        func client(_ pair: CurveKeyPair?) throws -> RPCClient {
            var configuration = RPCClient.Configuration(endpoint: role.rpcEndpoint, defaultTimeout: .seconds(5))
            configuration.curve = pair.map { CurveClientKeys(publicKey: $0.publicKey, secretKey: $0.secretKey, serverPublicKey: identityPair.publicKey) }
            return try RPCClient(configuration: configuration)
        }
        let gateway = try client(gatewayPair)
        let signUp = try await gateway.call(IdentityAPI.signUp, SignUpRequest(email: "curve@example.com", password: "correct horse battery"))
        // The identity service reached the token service over CURVE too.
        #expect(signUp.tokens.accessToken == "at-\(signUp.user.id)")

        // Least privilege: the gateway's key may not read a user's session claims (the token
        // service's method); the token service's key may, and may not sign users up.
        await #expect(throws: RPCError.self) {
            try await gateway.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: signUp.user.id))
        }
        do {
            _ = try await gateway.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: signUp.user.id))
        } catch let error as RPCError {
            #expect(error.code == .permissionDenied)
        }
        let asToken = try client(tokenPair)
        #expect(try await asToken.call(IdentityAPI.claimsForSession, ClaimsForSessionRequest(userID: signUp.user.id)).email == "curve@example.com")
        do {
            _ = try await asToken.call(IdentityAPI.signUp, SignUpRequest(email: "token@example.com", password: "correct horse battery"))
            Issue.record("the token service's key signed a user up")
        } catch let error as RPCError {
            #expect(error.code == .permissionDenied)
        }
        await asToken.close()

        let strangerPair = try CurveKeyPair.generate()
        let stranger = try client(strangerPair)
        await #expect(throws: RPCError.self) {
            try await stranger.call(IdentityAPI.getUser, UserIDRequest(userID: signUp.user.id), timeout: .milliseconds(800))
        }
        let handler = try ZAPHandler.handler(for: .shared)
        try await waitUntil("the ZAP handler counted the stranger's refusal") { handler.refusals(of: strangerPair.publicKey) > 0 }
        let plain = try client(nil)
        await #expect(throws: RPCError.self) {
            try await plain.call(IdentityAPI.getUser, UserIDRequest(userID: signUp.user.id), timeout: .milliseconds(800))
        }

        await gateway.close()
        await stranger.close()
        await plain.close()
        role.server.stop()
        await role.server.waitUntilStopped()
        await role.publisher.close()
        await role.tokenClient.close()
        tokenServer.stop()
        await tokenServer.waitUntilStopped()
    }

    @Test("the token role with CURVE keys: the gateway's key cannot mint a session or rotate the signing keys, the identity service's can; an unknown key is refused")
    func tokenRoleLeastPrivilege() async throws {
        let keys = try Self.keySet()
        defer { try? FileManager.default.removeItem(at: keys) }
        let path = { (name: String) in keys.appendingPathComponent(name).path }
        let (identityPair, tokenPair, gatewayPair) = try Self.pairs(keys)
        let dataDir = try TemporaryDirectory(prefix: "gh-curve-token")
        defer { dataDir.remove() }
        let config = try Config(environment: [
            "GATEHOUSE_DATA_DIR": dataDir.path,
            "GATEHOUSE_CURVE_SECRET_KEY_FILE": path("token.key"), "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE": path("token.allow"),
            "GATEHOUSE_IDENTITY_PUBLIC_KEY_FILE": path("identity.pub"),
        ])
        let settings = try TokenRoleSettings(config: config, rpcBind: "tcp://127.0.0.1:0", eventsBind: "tcp://127.0.0.1:0", identityURL: "tcp://127.0.0.1:9")
        let role = try await TokenRole.start(settings, logger: Logger(label: "test"))
        func client(_ pair: CurveKeyPair) throws -> RPCClient {
            var configuration = RPCClient.Configuration(endpoint: role.rpcEndpoint, defaultTimeout: .seconds(5))
            configuration.curve = CurveClientKeys(publicKey: pair.publicKey, secretKey: pair.secretKey, serverPublicKey: tokenPair.publicKey)
            return try RPCClient(configuration: configuration)
        }
        let issue = IssueSessionRequest(userID: "u-1", claims: UserClaims(email: "a@example.com"), amr: ["pwd"], authTime: Date(), client: ClientInfo())
        let gateway = try client(gatewayPair)
        do {
            _ = try await gateway.call(TokenAPI.issueSession, issue)
            Issue.record("the gateway's key minted a session")
        } catch let error as RPCError {
            #expect(error.code == .permissionDenied)
        }
        // What the gateway is for, it may do.
        #expect(try await gateway.call(TokenAPI.jwks, Empty()).json.contains("keys"))
        let identity = try client(identityPair)
        let minted = try await identity.call(TokenAPI.issueSession, issue)
        #expect(!minted.accessToken.isEmpty)
        // Signing keys: the identity service's key may rotate them (the admin API's
        // `POST /admin/v1/signing-keys/rotate`), the gateway's may not.
        let before = role.service.keys.activeKid
        do {
            _ = try await gateway.call(TokenAPI.rotateKeys, RotateKeysRequest())
            Issue.record("the gateway's key rotated the signing keys")
        } catch let error as RPCError {
            #expect(error.code == .permissionDenied)
        }
        #expect(role.service.keys.activeKid == before)
        let rotated = try await identity.call(TokenAPI.rotateKeys, RotateKeysRequest(actor: "admin_key:AAAAAAAAAAAAAAAA"))
        #expect(rotated.previousKid == before && role.service.keys.activeKid == rotated.kid)
        let stranger = try client(try CurveKeyPair.generate())
        await #expect(throws: RPCError.self) { try await stranger.call(TokenAPI.issueSession, issue, timeout: .milliseconds(800)) }
        for c in [gateway, identity, stranger] { await c.close() }
        role.server.stop()
        await role.server.waitUntilStopped()
        await role.publisher.close()
        await role.identityClient.close()
    }
}
