import Foundation
import GatehouseContracts
import GatehouseTestSupport
import GatehouseRPC
import IdentityCore
import IdentityService
import Logging
import Testing
@testable import GatehouseApp
import RPCRouting
import IdentityPorts

/// The identity role served over real tcp sockets, with a stand-in token service (also over
/// tcp) answering `token.issueSession`.
@Suite("Identity service over ZeroMQ")
struct IdentityOverZeroMQTests {
    struct Harness {
        let role: IdentityRole
        let tokenServer: RPCServer
        let client: RPCClient
        let events: EventSubscriber
        let dataDir: TemporaryDirectory

        static func start() async throws -> Harness {
            let tokenServer = try RPCServer(router: FakeTokenService().router, configuration: .init(endpoints: ["tcp://127.0.0.1:0"]))
            let tokenEndpoint = try tokenServer.start()[0]
            let dataDir = try TemporaryDirectory(prefix: "gh-identity")
            let config = try Config(environment: [
                "GATEHOUSE_DATA_DIR": dataDir.path, "GATEHOUSE_ALLOW_PLAINTEXT": "true",
                "GATEHOUSE_ARGON2_MEMORY_KIB": "1024", "GATEHOUSE_ARGON2_ITERATIONS": "1",
            ])
            let settings = try IdentityRoleSettings(
                config: config, rpcBind: "tcp://127.0.0.1:0", eventsBind: "tcp://127.0.0.1:0", tokenURL: tokenEndpoint)
            let role = try await IdentityRole.start(settings, logger: Logger(label: "test"))
            let client = try RPCClient(configuration: .init(endpoint: role.rpcEndpoint, defaultTimeout: .seconds(5)))
            let events = try EventSubscriber(endpoints: role.publisher.endpoints, topics: ["user."])
            return Harness(role: role, tokenServer: tokenServer, client: client, events: events, dataDir: dataDir)
        }

        func stop() async {
            await client.close()
            await events.close()
            role.server.stop()
            await role.server.waitUntilStopped()
            await role.publisher.close()
            await role.tokenClient.close()
            tokenServer.stop()
            await tokenServer.waitUntilStopped()
            dataDir.remove()
        }

        /// A topic the service never publishes, under the subscribed prefix.
        static let probeTopic = "user.probe"

        /// Publishes probe events on the role's publisher until the subscriber receives one: then
        /// its subscription has reached the publisher (subscriptions propagate asynchronously).
        func waitForSubscription(timeout: Duration = .seconds(30)) async throws {
            let publisher = role.publisher, events = events
            let probing = Task {
                let deadline = ContinuousClock.now + timeout
                while !Task.isCancelled, ContinuousClock.now < deadline {
                    publisher.publish(topic: Self.probeTopic, payload: [])
                    try? await Task.sleep(for: .milliseconds(10))
                }
                // Gave up: ending the stream ends the wait below.
                if !Task.isCancelled { await events.close() }
            }
            var subscribed = false
            for await event in events.events where event.topic == Self.probeTopic {
                subscribed = true
                break
            }
            probing.cancel()
            await probing.value
            guard subscribed else { throw WaitTimedOut(description: "no probe event reached the subscriber within \(timeout)") }
        }
    }

    @Test("sign-up, sign-in, profile, claims and deletion over tcp, with user events")
    func lifecycle() async throws {
        let h = try await Harness.start()
        // The subscription reaches the publisher before anything happens.
        try await h.waitForSubscription()
        let email = "Ada.Lovelace@Example.com"
        let signUp = try await h.client.call(IdentityAPI.signUp, SignUpRequest(email: email, password: "analytical engine 1843", displayName: "Ada"))
        #expect(signUp.user.email == email)
        #expect(signUp.tokens.accessToken == "at-\(signUp.user.id)")
        let id = signUp.user.id

        let signIn = try await h.client.call(IdentityAPI.signIn, SignInRequest(email: "ada.lovelace@example.com", password: "analytical engine 1843"))
        #expect(signIn.user.id == id)

        do {
            _ = try await h.client.call(IdentityAPI.signIn, SignInRequest(email: email, password: "wrong password here"))
            Issue.record("a wrong password signed in")
        } catch let error as RPCError {
            #expect(error.code == "invalid_credentials")
        }
        do {
            _ = try await h.client.call(IdentityAPI.signUp, SignUpRequest(email: "ADA.LOVELACE@example.com", password: "another long password"))
            Issue.record("a duplicate email signed up")
        } catch let error as RPCError {
            #expect(error.code == "email_exists")
        }

        let updated = try await h.client.call(IdentityAPI.updateProfile, UpdateProfileRequest(
            userID: id, displayName: "Countess", photoURL: nil, settingsJSON: #"{"theme":"dark"}"#, expectedVersion: signUp.user.version))
        #expect(updated.displayName == "Countess")
        do {
            _ = try await h.client.call(IdentityAPI.updateProfile, UpdateProfileRequest(
                userID: id, displayName: "Stale", photoURL: nil, settingsJSON: nil, expectedVersion: signUp.user.version))
            Issue.record("a stale version was accepted")
        } catch let error as RPCError {
            #expect(error.code == "version_conflict")
        }

        let claims = try await h.client.call(ServiceContracts.claimsForSession, ClaimsForSessionRequest(userID: id))
        #expect(claims.exists && !claims.disabled && claims.email == email)

        let strength = try await h.client.call(IdentityAPI.passwordStrength, PasswordStrengthRequest(password: "password"))
        #expect(strength.score <= 1 && !strength.acceptable)

        _ = try await h.client.call(IdentityAPI.deleteUser, UserIDRequest(userID: id))
        let gone = try await h.client.call(ServiceContracts.claimsForSession, ClaimsForSessionRequest(userID: id))
        #expect(!gone.exists)
        do {
            _ = try await h.client.call(IdentityAPI.getUser, UserIDRequest(userID: id))
            Issue.record("a deleted user was found")
        } catch let error as RPCError {
            #expect(error.code == "user_not_found")
        }

        var topics: [String] = []
        // Probes published before the subscription was seen may still be queued ahead.
        for await event in h.events.events where event.topic != Harness.probeTopic {
            topics.append(event.topic)
            let decoded = try event.decode(UserEvent.self)
            #expect(decoded.userID == id)
            if event.topic == IdentityAPI.Topic.userDeleted { break }
        }
        #expect(topics.first == IdentityAPI.Topic.userCreated)
        #expect(topics.contains(IdentityAPI.Topic.userUpdated))
        #expect(topics.last == IdentityAPI.Topic.userDeleted)
        await h.stop()
    }

    @Test("a body with invalid UTF-8 in the email field is refused and writes nothing")
    func invalidUTF8() async throws {
        let h = try await Harness.start()
        // SignUpRequest: field 1 (email) with bytes that are not UTF-8.
        let raw = RPCMethod<RawBody, AuthResponse>(name: IdentityAPI.signUp.name)
        do {
            _ = try await h.client.call(raw, RawBody(bytes: [0xC3, 0x28, 0x40, 0x61]))
            Issue.record("invalid UTF-8 was accepted")
        } catch let error as RPCError {
            #expect(error.code == .malformedRequest)
        }
        #expect(try await h.role.service.store.count() == 0)
        await h.stop()
    }
}

/// A request whose field 1 is arbitrary bytes (to smuggle invalid UTF-8 into a string field).
struct RawBody: Codable, Sendable {
    var bytes: [UInt8]
    enum CodingKeys: Int, CodingKey { case bytes = 1 }
}
