import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
@testable import LoadGenerator

@Suite("HTTP engines")
struct EngineTests {
    @Test(arguments: HTTPEngine.allCases)
    func refreshRunsOnEveryEngine(engine: HTTPEngine) async throws {
        let fake = FakeGateway()
        var config = small("", .refresh, requests: 200, concurrency: 8, setupUsers: 4)
        config.engine = engine
        let result = try await fake.serve { url in
            config.url = url
            return try await LoadRunner(config).run()
        }
        #expect(result.totalRequests == 200)
        #expect(result.successfulRequests == 200, "\(result.errorSamples)")
        #expect(fake.snapshot.reusedRefreshTokens == 0)
    }

    @Test func requestBodiesAreJSONWithEscapes() throws {
        let bytes = Run.jsonObject(["email": "a\"b\\c@example.com", "password": "tab\there\u{1}"])
        let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: String]
        #expect(object == ["email": "a\"b\\c@example.com", "password": "tab\there\u{1}"])
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"email":"a\"b\\c@example.com","password":"tab\u0009here\u0001"}"#)
    }

    @Test func leanClientRequestBytes() throws {
        let target = try TargetGuard.check(url: "http://127.0.0.1:8080/base/", allowRemote: false)
        let client = try LeanHTTPClient.make(target: target, group: MultiThreadedEventLoopGroup.singleton, timeout: 1, maxBody: 100)
        let request = client.prepare(method: "POST", path: "/v1/x", headers: [("Accept", "application/json")], body: Array("{}".utf8))
        #expect(request.head.uri == "/base/v1/x")
        #expect(request.head.method == .POST)
        #expect(request.head.headers["Host"] == ["127.0.0.1:8080"])
        #expect(request.head.headers["Content-Length"] == ["2"])
        #expect(request.head.headers["Accept"] == ["application/json"])
        #expect(request.body.map { String(buffer: $0) } == "{}")
    }

    @Test func leanClientRefusesHTTPS() throws {
        let target = Target(baseURL: "https://127.0.0.1:8443", host: "127.0.0.1", addresses: ["127.0.0.1"])
        #expect(throws: LoadError.self) {
            _ = try LeanHTTPClient.make(target: target, group: MultiThreadedEventLoopGroup.singleton, timeout: 1, maxBody: 100)
        }
    }

    @Test(arguments: [HTTPEngine.loop, .nio])
    func aServerThatNeverAnswersIsATimeout(engine: HTTPEngine) async throws {
        // Accepts connections and reads requests, never answers.
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in channel.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { server.close(promise: nil) }
        let port = server.localAddress!.port!
        var config = small("http://127.0.0.1:\(port)", .rawGet, requests: 4, concurrency: 2)
        config.timeout = 0.3
        config.engine = engine
        let result = try await LoadRunner(config).run()
        #expect(result.totalRequests == 4)
        #expect(result.errorsByKind["timeout"] == 4, "\(result.errorsByKind) \(result.errorSamples)")
    }

    @Test(arguments: [HTTPEngine.loop, .nio])
    func bodiesOverTheLimitAreRefused(engine: HTTPEngine) async throws {
        let fake = FakeGateway()
        var config = small("", .rawGet, requests: 2, concurrency: 1)
        config.path = "/big"
        config.engine = engine
        let result = try await fake.serve { url in
            config.url = url
            return try await LoadRunner(config).run()
        }
        #expect(result.errorsByKind["body_too_large"] == 2, "\(result.errorsByKind) \(result.errorSamples)")
    }
}
