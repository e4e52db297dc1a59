import Foundation
import Testing
import Gateway
@testable import GatehouseApp

@Suite("Event stream configuration (GET /v1/me/events)")
struct StreamConfigTests {
    static let plain = ["GATEHOUSE_ALLOW_PLAINTEXT": "true"]

    @Test func defaultsAndValues() throws {
        let defaults = try GatewayRoleSettings(config: Config(environment: Self.plain))
        #expect(defaults.identityEventsURL == "tcp://127.0.0.1:7002")
        let d = defaults.gateway.streams
        #expect(d.heartbeat == .seconds(25) && d.retryMs == 3000 && d.maxStreams == 10_000 && d.maxPerUser == 10)
        #expect(d.expiryNotice == .seconds(60) && d.bufferBytes == 65_536 && d.changeFeedHeartbeat == .seconds(1))

        let settings = try GatewayRoleSettings(config: Config(environment: Self.plain.merging([
            "GATEHOUSE_IDENTITY_EVENTS_URL": "tcp://identity:7002", "GATEHOUSE_STREAM_HEARTBEAT": "5", "GATEHOUSE_STREAM_RETRY_MS": "0",
            "GATEHOUSE_STREAM_MAX": "20000", "GATEHOUSE_STREAM_MAX_PER_USER": "3", "GATEHOUSE_STREAM_EXPIRY_NOTICE": "0",
            "GATEHOUSE_STREAM_BUFFER_BYTES": "16384", "GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS": "250",
        ]) { $1 }))
        #expect(settings.identityEventsURL == "tcp://identity:7002")
        let s = settings.gateway.streams
        #expect(s.heartbeat == .seconds(5) && s.retryMs == 0 && s.maxStreams == 20_000 && s.maxPerUser == 3)
        #expect(s.expiryNotice == .zero && s.bufferBytes == 16_384 && s.changeFeedHeartbeat == .milliseconds(250))

        let serve = try GatewayRoleSettings(config: Config(environment: Self.plain), identityEventsURL: "inproc://identity-events")
        #expect(serve.identityEventsURL == "inproc://identity-events")
    }

    @Test(arguments: [
        ("GATEHOUSE_IDENTITY_EVENTS_URL", "identity:7002"), ("GATEHOUSE_STREAM_HEARTBEAT", "0"), ("GATEHOUSE_STREAM_HEARTBEAT", "301"),
        ("GATEHOUSE_STREAM_RETRY_MS", "-1"), ("GATEHOUSE_STREAM_MAX", "0"), ("GATEHOUSE_STREAM_MAX_PER_USER", "0"),
        ("GATEHOUSE_STREAM_EXPIRY_NOTICE", "3601"), ("GATEHOUSE_STREAM_BUFFER_BYTES", "1000"), ("GATEHOUSE_STREAM_BUFFER_BYTES", "lots"),
        ("GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS", "50"),
    ])
    func badValuesNameTheirKey(key: String, value: String) throws {
        do {
            _ = try GatewayRoleSettings(config: Config(environment: Self.plain.merging([key: value]) { $1 }))
            Issue.record("\(key)=\(value) was accepted")
        } catch let error as ConfigError {
            #expect(error.message.contains(key), "\(error.message)")
        }
    }
}
