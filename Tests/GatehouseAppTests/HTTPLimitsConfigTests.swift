import Foundation
import Gateway
import Testing
@testable import GatehouseApp

@Suite("HTTP timeouts and connection caps in the configuration")
struct HTTPLimitsConfigTests {
    @Test("defaults: head 10 s, body 30 s, idle 60 s, 10 000 connections, 256 per address")
    func defaults() throws {
        let gateway = try GatewayRoleSettings(config: Config(environment: ["GATEHOUSE_ALLOW_PLAINTEXT": "true"])).gateway
        #expect(gateway.headTimeout == .seconds(10))
        #expect(gateway.bodyTimeout == .seconds(30))
        #expect(gateway.idleTimeout == .seconds(60))
        #expect(gateway.maxConnections == 10_000)
        #expect(gateway.maxConnectionsPerAddress == 256)
    }

    @Test("the keys set the gateway's limits; a value out of range names its key")
    func keys() throws {
        let gateway = try GatewayRoleSettings(config: Config(environment: ["GATEHOUSE_ALLOW_PLAINTEXT": "true",
            "GATEHOUSE_HTTP_HEAD_TIMEOUT_MS": "500", "GATEHOUSE_HTTP_BODY_TIMEOUT_MS": "1500", "GATEHOUSE_HTTP_IDLE_TIMEOUT_MS": "2500",
            "GATEHOUSE_HTTP_MAX_CONNECTIONS": "100", "GATEHOUSE_HTTP_MAX_CONNECTIONS_PER_ADDRESS": "0",
        ])).gateway
        #expect(gateway.headTimeout == .milliseconds(500))
        #expect(gateway.bodyTimeout == .milliseconds(1500))
        #expect(gateway.idleTimeout == .milliseconds(2500))
        #expect(gateway.maxConnections == 100)
        #expect(gateway.maxConnectionsPerAddress == 0)
        for (key, value) in [("GATEHOUSE_HTTP_HEAD_TIMEOUT_MS", "0"), ("GATEHOUSE_HTTP_MAX_CONNECTIONS", "0"),
                             ("GATEHOUSE_HTTP_MAX_CONNECTIONS_PER_ADDRESS", "-1"), ("GATEHOUSE_HTTP_IDLE_TIMEOUT_MS", "soon")] {
            do {
                _ = try GatewayRoleSettings(config: Config(environment: [key: value, "GATEHOUSE_ALLOW_PLAINTEXT": "true"]))
                Issue.record("\(key)=\(value) was accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains(key), "\(error.message)")
            }
        }
    }
}
