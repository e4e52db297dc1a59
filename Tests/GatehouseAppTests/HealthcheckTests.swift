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

    @Test("the role of PID 1's command line, when it is gatehouse")
    func roleFromCommandLine() {
        func line(_ words: String...) -> [UInt8] { Array(words.joined(separator: "\u{0}").utf8) + [0] }
        #expect(Healthcheck.role(commandLine: line("gatehouse", "identity")) == .identity)
        #expect(Healthcheck.role(commandLine: line("/usr/local/bin/gatehouse", "token", "--log-level", "debug")) == .token)
        #expect(Healthcheck.role(commandLine: line("gatehouse", "serve")) == .serve)
        #expect(Healthcheck.role(commandLine: line("gatehouse", "healthcheck")) == nil)
        #expect(Healthcheck.role(commandLine: line("/sbin/init")) == nil)
        #expect(Healthcheck.role(commandLine: line("sh", "-c", "gatehouse identity")) == nil)
        #expect(Healthcheck.role(commandLine: []) == nil)
    }
}
