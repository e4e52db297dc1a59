import Foundation
import GatehouseContracts
import GatehouseRPC
import GatehouseTestSupport
import IdentityService
import Logging
import RPCRouting
import Testing
@testable import GatehouseApp

/// The identity role's change log (issue 21): its settings, and `user.changed` and
/// `identity.heartbeat` published over a real tcp PUB socket.
@Suite("Identity role: change log")
struct ChangeLogRoleTests {
    let plain = ["GATEHOUSE_ALLOW_PLAINTEXT": "true"]

    @Test("GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS, GATEHOUSE_CHANGE_LOG_RETENTION, GATEHOUSE_CHANGE_LOG_MAX_PER_USER: defaults, bounds, and errors naming the key")
    func configuration() throws {
        let defaults = try IdentityRoleSettings(config: Config(environment: plain))
        #expect(defaults.changeFeedHeartbeat == .milliseconds(1000))
        #expect(defaults.service.changeLogRetention == 86_400 && defaults.service.changeLogMaxPerUser == 1000)
        let set = try IdentityRoleSettings(config: Config(environment: plain.merging([
            "GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS": "100", "GATEHOUSE_CHANGE_LOG_RETENTION": "60", "GATEHOUSE_CHANGE_LOG_MAX_PER_USER": "100000",
        ]) { $1 }))
        #expect(set.changeFeedHeartbeat == .milliseconds(100))
        #expect(set.service.changeLogRetention == 60 && set.service.changeLogMaxPerUser == 100_000)
        for (key, value) in [
            ("GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS", "99"), ("GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS", "60001"), ("GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS", "1s"),
            ("GATEHOUSE_CHANGE_LOG_RETENTION", "59"), ("GATEHOUSE_CHANGE_LOG_RETENTION", "2592001"), ("GATEHOUSE_CHANGE_LOG_RETENTION", "1 day"),
            ("GATEHOUSE_CHANGE_LOG_MAX_PER_USER", "9"), ("GATEHOUSE_CHANGE_LOG_MAX_PER_USER", "100001"), ("GATEHOUSE_CHANGE_LOG_MAX_PER_USER", ""),
        ] {
            do {
                _ = try IdentityRoleSettings(config: Config(environment: plain.merging([key: value]) { $1 }))
                Issue.record("\(key)=\(value) was accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains(key), "\(error.message)")
            }
        }
    }

    @Test("over tcp: identity.heartbeat beats at the newest seq; a profile change arrives as user.changed with its seq, kinds and user; sign-in publishes nothing")
    func feedOverTCP() async throws {
        let tokenServer = try RPCServer(router: FakeTokenService().router, configuration: .init(endpoints: ["tcp://127.0.0.1:0"]))
        let tokenEndpoint = try tokenServer.start()[0]
        let dataDir = try TemporaryDirectory(prefix: "gh-changelog")
        let config = try Config(environment: [
            "GATEHOUSE_DATA_DIR": dataDir.path, "GATEHOUSE_ALLOW_PLAINTEXT": "true", "GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS": "100",
            "GATEHOUSE_ARGON2_MEMORY_KIB": "1024", "GATEHOUSE_ARGON2_ITERATIONS": "1",
        ])
        let settings = try IdentityRoleSettings(
            config: config, rpcBind: "tcp://127.0.0.1:0", eventsBind: "tcp://127.0.0.1:0", tokenURL: tokenEndpoint)
        let role = try await IdentityRole.start(settings, logger: Logger(label: "test"))
        let client = try RPCClient(configuration: .init(endpoint: role.rpcEndpoint, defaultTimeout: .seconds(5)))
        let events = try EventSubscriber(
            endpoints: role.publisher.endpoints, topics: [IdentityAPI.Topic.userChanged, IdentityAPI.Topic.changeFeedHeartbeat])
        let feed = Task { try await role.changeLog.run() }
        // Gives up after 30 s: closing the subscriber ends the loops below.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(30))
            await events.close()
        }
        var iterator = events.events.makeAsyncIterator()
        // The first heartbeat seen: the subscription is up.
        while let event = await iterator.next(), event.topic != IdentityAPI.Topic.changeFeedHeartbeat {}

        let user = try await client.call(IdentityAPI.signUp, SignUpRequest(email: "ada@example.com", password: "analytical engine 1843")).user
        _ = try await client.call(IdentityAPI.signIn, SignInRequest(email: "ada@example.com", password: "analytical engine 1843"))
        _ = try await client.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: user.id, settingsJSON: #"{"theme":"dark"}"#))
        var changes: [UserChange] = []
        var beatAfter: UInt64?
        while let event = await iterator.next() {
            if event.topic == IdentityAPI.Topic.userChanged { changes.append(try event.decode(UserChange.self)) }
            if event.topic == IdentityAPI.Topic.changeFeedHeartbeat, !changes.isEmpty {
                beatAfter = try event.decode(ChangeFeedHeartbeat.self).seq
                break
            }
        }
        #expect(changes.map(\.seq) == [1])
        #expect(changes.first?.kinds == ["settings"] && changes.first?.userID == user.id)
        #expect(changes.first?.user?.settingsJSON == #"{"theme":"dark"}"#)
        #expect(beatAfter == 1)

        watchdog.cancel()
        feed.cancel()
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
}
