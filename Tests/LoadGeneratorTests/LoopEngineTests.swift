import GatehouseTestSupport
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
@testable import LoadGenerator

@Suite("Loop engine")
struct LoopEngineTests {
    func client(_ url: String, threads: Int = 1, timeout: Double = 5, maxBody: Int = 1 << 20, poller: PollerKind = .default) throws -> LoopHTTPClient {
        let target = try TargetGuard.check(url: url, allowRemote: false)
        return try LoopHTTPClient.make(target: target, threads: threads, timeout: timeout, maxBody: maxBody, poller: poller)
    }

    @Test func requestBytes() throws {
        let client = try client("http://127.0.0.1:8080/base/")
        defer { Task { await client.shutdown() } }
        let bytes = client.serialize(method: "POST", path: "/v1/x", headers: [("Accept", "application/json")], body: Array("{}".utf8))
        #expect(String(decoding: bytes, as: UTF8.self)
            == "POST /base/v1/x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: application/json\r\nContent-Length: 2\r\n\r\n{}")
        let get = client.serialize(method: "GET", path: "/healthz", headers: [], body: nil)
        #expect(String(decoding: get, as: UTF8.self) == "GET /base/healthz HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
    }

    @Test func refusesHTTPS() {
        let target = Target(baseURL: "https://127.0.0.1:8443", host: "127.0.0.1", addresses: ["127.0.0.1"])
        #expect(throws: LoadError.self) { _ = try LoopHTTPClient.make(target: target, threads: 1, timeout: 1, maxBody: 100) }
    }

    @Test(arguments: [PollerKind.epoll, .poll])
    func splitChunkedAndKeptAlive(poller: PollerKind) async throws {
        // Each response in pieces (head split mid-line, chunked body), all on one connection.
        let server = ScriptedServer { n in
            .init(pieces: ["HTTP/1.1 200 OK\r\nTransfer-", "Encoding: chunked\r\n\r\n3\r\nab", "c\r\n2\r\n\(n % 10)!\r\n0\r\n\r\n"])
        }
        let bodies = try await server.serve { url in
            let client = try client(url, poller: poller)
            var bodies: [String] = []
            for _ in 0..<5 {
                let response = try await client.execute(method: "GET", path: "/", headers: [], body: nil)
                #expect(response.status == 200)
                bodies.append(String(decoding: response.body, as: UTF8.self))
            }
            await client.shutdown()
            return bodies
        }
        #expect(bodies == ["abc0!", "abc1!", "abc2!", "abc3!", "abc4!"])
        #expect(server.connections.load(ordering: .relaxed) == 1)
    }

    @Test func connectionCloseMeansANewConnection() async throws {
        let server = ScriptedServer { _ in .init(pieces: ["HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"], close: true) }
        try await server.serve { url in
            let client = try client(url)
            for _ in 0..<3 {
                let response = try await client.execute(method: "GET", path: "/", headers: [], body: nil)
                #expect(response.status == 200 && response.body == Array("ok".utf8))
            }
            await client.shutdown()
        }
        #expect(server.connections.load(ordering: .relaxed) == 3)
    }

    @Test func anIdleConnectionTheServerClosedIsNotReused() async throws {
        let server = ScriptedServer(idleClose: .milliseconds(20)) { _ in .init(pieces: ["HTTP/1.1 204 No Content\r\n\r\n"]) }
        try await server.serve { url in
            let client = try client(url)
            for round in 1...3 {
                let response = try await client.execute(method: "GET", path: "/", headers: [], body: nil)
                #expect(response.status == 204)
                // Until the server has closed the idle connection (its FIN is then at the client).
                try await waitUntil("idle close \(round)") { server.idleClosed.load(ordering: .relaxed) == round }
            }
            await client.shutdown()
        }
        #expect(server.connections.load(ordering: .relaxed) == 3)
    }

    @Test func closeDelimitedBodyAndInterimResponse() async throws {
        let server = ScriptedServer { n in
            n == 0 ? .init(pieces: ["HTTP/1.1 200 OK\r\n\r\nall of ", "it"], close: true)
                : .init(pieces: ["HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nnew"])
        }
        let (first, second) = try await server.serve { url in
            let client = try client(url)
            let first = try await client.execute(method: "GET", path: "/", headers: [], body: nil)
            let second = try await client.execute(method: "POST", path: "/", headers: [], body: Array("x".utf8))
            await client.shutdown()
            return (first, second)
        }
        #expect(first.status == 200 && first.body == Array("all of it".utf8))
        #expect(second.status == 201 && second.body == Array("new".utf8))
    }

    @Test func garbageAndEarlyCloseAreErrorsOfTheirKind() async throws {
        let server = ScriptedServer { n in
            n == 0 ? .init(pieces: ["SMTP ready\r\n\r\n"]) : .init(pieces: ["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"], close: true)
        }
        let kinds = try await server.serve { url in
            let client = try client(url)
            var kinds: [String] = []
            for _ in 0..<2 {
                do {
                    _ = try await client.execute(method: "GET", path: "/", headers: [], body: nil)
                    kinds.append("ok")
                } catch let failure as LoopHTTPClient.Failure {
                    kinds.append(failure.kind.rawValue)
                }
            }
            await client.shutdown()
            return kinds
        }
        #expect(kinds == ["protocol", "connection_closed"])
    }

    @Test func requestsFromOutsideTheLoopAndAcrossThreads() async throws {
        // 32 concurrent callers on Swift's pool, spread over two loops.
        let fake = FakeGateway()
        let statuses = try await fake.serve { url in
            let client = try client(url, threads: 2)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<32 {
                    group.addTask { try await client.execute(method: "GET", path: "/healthz", headers: [], body: nil).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            await client.shutdown()
            return statuses
        }
        #expect(statuses == Array(repeating: 200, count: 32))
        #expect(fake.snapshot.healthz == 32)
    }

    @Test func refreshScenarioOnTwoLoopThreads() async throws {
        let fake = FakeGateway()
        var config = small("", .refresh, requests: 400, concurrency: 16, setupUsers: 4)
        config.threads = 2
        let result = try await fake.serve { url in
            config.url = url
            return try await LoadRunner(config).run()
        }
        #expect(result.successfulRequests == 400, "\(result.errorSamples)")
        #expect(fake.snapshot.reusedRefreshTokens == 0)
    }

    @Test func stoppingFailsWhatIsInFlightAndRefusesLaterRequests() async throws {
        // A server that never answers: the request waits until the client stops.
        let server = ScriptedServer { _ in .init(pieces: []) }
        let kinds = try await server.serve { url in
            let client = try client(url, timeout: 30)
            async let waiting: String = {
                do {
                    _ = try await client.execute(method: "GET", path: "/", headers: [], body: nil)
                    return "ok"
                } catch {
                    return (error as? LoopHTTPClient.Failure)?.kind.rawValue ?? "\(error)"
                }
            }()
            try await waitUntil("the request reached the server") { server.requests.load(ordering: .relaxed) > 0 }
            await client.shutdown()
            let first = await waiting
            var later = "ok"
            do { _ = try await client.execute(method: "GET", path: "/", headers: [], body: nil) } catch let failure as LoopHTTPClient.Failure {
                later = failure.kind.rawValue
            }
            return [first, later]
        }
        #expect(kinds == ["connection_closed", "connection_closed"])
    }

    @Test func threadsAreBounded() {
        var config = LoadConfiguration(scenario: .me)
        config.threads = 0
        #expect(throws: LoadError.self) { try config.validate() }
        config.threads = 65
        #expect(throws: LoadError.self) { try config.validate() }
    }
}
