import Testing
@testable import GatehouseApp

@Suite("Healthcheck endpoints")
struct HealthcheckEndpointTests {
    @Test("wildcard binds are probed on loopback; other endpoints are left alone")
    func loopback() {
        #expect(Healthcheck.loopbackEndpoint("tcp://0.0.0.0:7001") == "tcp://127.0.0.1:7001")
        #expect(Healthcheck.loopbackEndpoint("tcp://*:7011") == "tcp://127.0.0.1:7011")
        #expect(Healthcheck.loopbackEndpoint("tcp://[::]:7001") == "tcp://[::1]:7001")
        #expect(Healthcheck.loopbackEndpoint("tcp://10.0.0.5:7001") == "tcp://10.0.0.5:7001")
        #expect(Healthcheck.loopbackEndpoint("tcp://127.0.0.1:7001") == "tcp://127.0.0.1:7001")
        #expect(Healthcheck.loopbackEndpoint("ipc:///tmp/identity") == "ipc:///tmp/identity")
        #expect(Healthcheck.loopbackHost("0.0.0.0") == "127.0.0.1")
        #expect(Healthcheck.loopbackHost("localhost") == "localhost")
    }
}
