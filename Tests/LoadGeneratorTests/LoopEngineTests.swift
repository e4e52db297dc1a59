import GatehouseTestSupport
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
@testable import LoadGenerator

// MARK: Response parser

@Suite("HTTP response parser")
struct HTTPResponseParserTests {
    /// Feeds `text` to a fresh parser all at once, then byte by byte; both must agree.
    func parse(_ text: String, maxBody: Int = 1 << 20, closed: Bool = false) -> HTTPResponseParser.Outcome {
        let bytes = Array(text.utf8)
        var whole = HTTPResponseParser(maxBody: maxBody)
        let once = bytes.withUnsafeBufferPointer { whole.parse($0, closed: closed) }
        var stepwise = HTTPResponseParser(maxBody: maxBody)
        var last = HTTPResponseParser.Outcome.needMore
        for end in 1...bytes.count {
            last = bytes.withUnsafeBufferPointer { stepwise.parse(UnsafeBufferPointer(rebasing: $0[0..<end]), closed: closed && end == bytes.count) }
            if case .needMore = last { continue }
            if end < bytes.count, case .complete = last {
                Issue.record("complete after \(end) of \(bytes.count) bytes")
            }
            break
        }
        #expect(once == last, "all at once and byte by byte disagree")
        return once
    }

    func response(_ outcome: HTTPResponseParser.Outcome) -> HTTPResponseParser.Response? {
        if case .complete(let response) = outcome { return response }
        Issue.record("not complete: \(outcome)")
        return nil
    }

    @Test func contentLength() {
        let text = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length:  7 \r\n\r\n{\"a\":1}"
        let r = response(parse(text))
        #expect(r?.status == 200)
        #expect(r.map { String(decoding: $0.body, as: UTF8.self) } == "{\"a\":1}")
        #expect(r?.keepAlive == true)
        #expect(r?.consumed == text.utf8.count)
    }

    @Test func incompleteBodyNeedsMore() {
        var parser = HTTPResponseParser(maxBody: 100)
        let bytes = Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345".utf8)
        #expect(bytes.withUnsafeBufferPointer { parser.parse($0, closed: false) } == .needMore)
        #expect(bytes.withUnsafeBufferPointer { parser.parse($0, closed: true) } == .failed(.malformed("connection closed inside the body")))
    }

    @Test func chunkedWithExtensionsAndTrailers() {
        let text = "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: yes\r\n\r\n"
        let r = response(parse(text))
        #expect(r?.status == 201)
        #expect(r.map { String(decoding: $0.body, as: UTF8.self) } == "Wikipedia in\r\n\r\nchunks.")
        #expect(r?.consumed == text.utf8.count)
    }

    @Test func interimResponsesAreSkipped() {
        let r = response(parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        #expect(r?.status == 200)
        #expect(r?.body == Array("ok".utf8))
    }

    @Test func bodilessStatuses() {
        #expect(response(parse("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"))?.body == [])
        #expect(response(parse("HTTP/1.1 304 Not Modified\r\n\r\n"))?.body == [])
    }

    @Test func closeDelimitedBody() {
        #expect(parse("HTTP/1.1 200 OK\r\n\r\nuntil close") == .needMore)
        let r = response(parse("HTTP/1.1 200 OK\r\n\r\nuntil close", closed: true))
        #expect(r?.body == Array("until close".utf8))
        #expect(r?.keepAlive == false)
    }

    @Test func connectionPersistence() {
        #expect(response(parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"))?.keepAlive == false)
        #expect(response(parse("HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\nContent-Length: 0\r\n\r\n"))?.keepAlive == false)
        #expect(response(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"))?.keepAlive == false)
        #expect(response(parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"))?.keepAlive == true)
        #expect(response(parse("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"))?.keepAlive == true)
    }

    @Test(arguments: [
        "HTTX/1.1 200 OK\r\n\r\n",
        "HTTP/2.0 200 OK\r\n\r\n",
        "HTTP/1.1 2x0 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
    ])
    func malformedResponsesFail(text: String) {
        guard case .failed(.malformed) = parse(text) else {
            Issue.record("accepted: \(text.debugDescription)")
            return
        }
    }

    @Test func mutatedResponsesNeverTrapAndParseAlikeInAnyPieces() {
        // Random byte mutations of valid responses, fed whole and in random pieces: never a
        // trap, and the same outcome either way (the parser's resumption is exact).
        let samples = [
            "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\n{\"ok\":true}\n",
            "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;x=y\r\n!\r\n0\r\nT: 1\r\n\r\n",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 503 Busy\r\nRetry-After: 1\r\n\r\nlater",
        ].map { Array($0.utf8) }
        let alphabet = Array("0123456789abcdefABCDEF \r\n:;-HTTP/.".utf8) + [0, 0xFF]
        var generator = SystemRandomNumberGenerator()
        var outcomes = Set<String>()
        for _ in 0..<4000 {
            var bytes = samples.randomElement(using: &generator)!
            for _ in 0..<Int.random(in: 0...3, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
            }
            let closed = Bool.random(using: &generator)
            var whole = HTTPResponseParser(maxBody: 64)
            let once = bytes.withUnsafeBufferPointer { whole.parse($0, closed: closed) }
            var pieces = HTTPResponseParser(maxBody: 64)
            var end = 0
            var last = HTTPResponseParser.Outcome.needMore
            while end < bytes.count {
                end = min(bytes.count, end + Int.random(in: 1...16, using: &generator))
                last = bytes.withUnsafeBufferPointer { pieces.parse(UnsafeBufferPointer(rebasing: $0[0..<end]), closed: closed && end == bytes.count) }
                if case .needMore = last { continue }
                break
            }
            // A piece that ends exactly at a complete response may complete it before the rest
            // of the bytes (the mutations can shorten a body); then both must agree on what it was.
            if case .complete(let early) = last, end < bytes.count {
                var check = HTTPResponseParser(maxBody: 64)
                let prefix = Array(bytes[0..<early.consumed])
                #expect(prefix.withUnsafeBufferPointer { check.parse($0, closed: false) } == last)
                continue
            }
            #expect(once == last, "\(String(decoding: bytes, as: UTF8.self).debugDescription)")
            outcomes.insert("\(once)".prefix(12).description)
        }
        #expect(outcomes.count >= 3)  // complete, failed and needMore all seen
    }

    @Test func limits() {
        #expect(parse("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", maxBody: 10) == .failed(.bodyTooLarge))
        #expect(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nB\r\n", maxBody: 10) == .failed(.bodyTooLarge))
        #expect(parse("HTTP/1.1 200 OK\r\n\r\n" + String(repeating: "x", count: 11), maxBody: 10) == .failed(.bodyTooLarge))
        #expect(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n123456789\r\n") == .failed(.malformed("chunk size too large")))
        var parser = HTTPResponseParser(maxHead: 64, maxBody: 10)
        let head = Array(("HTTP/1.1 200 OK\r\nX: " + String(repeating: "y", count: 100)).utf8)
        #expect(head.withUnsafeBufferPointer { parser.parse($0, closed: false) } == .failed(.headTooLarge))
    }
}

// MARK: JSON reader

@Suite("JSON reader")
struct JSONValueTests {
    func parse(_ text: String) -> JSONValue? { try? JSONValue.parse(Array(text.utf8)) }

    @Test func values() throws {
        let value = parse(#" {"s":"a\"b\\c\/\n\u00e9\ud83d\ude00","n":[0,-0.5,1e3,12.25E-1],"t":true,"f":false,"z":null,"o":{}} "#)
        #expect(value?["s"]?.string == "a\"b\\c/\né😀")
        #expect(value?["n"] == .array([.number(0), .number(-0.5), .number(1000), .number(1.225)]))
        #expect(value?["t"] == .bool(true))
        #expect(value?["f"] == .bool(false))
        #expect(value?["z"] == .null)
        #expect(value?["o"] == .object([:]))
        #expect(parse("\"héllo\"") == .string("héllo"))
        #expect(parse("[]") == .array([]))
    }

    @Test(arguments: [
        "", " ", "{", "{\"a\":1,}", "[1 2]", "[1,]", "{a:1}", "{\"a\" 1}", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"",
        "\"\\ud800\\u0041\"", "\"\\u12\"", "01", "1.", "-", ".5", "1e", "tru", "nul", "[1] x", "\"a\tb\"", "\"unterminated",
        "{\"a\":1}}", "+1", "NaN", "[\"a\",]",
    ])
    func invalidDocumentsAreRefused(text: String) {
        #expect(parse(text) == nil, "accepted: \(text.debugDescription)")
    }

    @Test func invalidUTF8AndDepth() {
        #expect((try? JSONValue.parse([0x22, 0xFF, 0x22])) == nil)
        #expect((try? JSONValue.parse([0x22, 0x5C, 0x6E, 0xC3, 0x22])) == nil)
        #expect(parse(String(repeating: "[", count: 64) + String(repeating: "]", count: 64)) != nil)
        #expect(parse(String(repeating: "[", count: 65) + String(repeating: "]", count: 65)) == nil)
    }

    @Test func agreesWithJSONSerializationOnMutations() throws {
        // Random single-byte mutations of a realistic body: never a crash, and whatever both
        // parsers accept, they read alike (strings and numbers compared through Foundation).
        let base = Array(#"{"user":{"id":"u_1","email":"a@example.com","emailVerified":false,"settings":{"k":[1,2.5,"x"]}},"session":{"accessToken":"eyJ.a.b","expiresIn":900}}"#.utf8)
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ 0123456789.eE+-tfnulrsa"#.utf8) + [0x00, 0x7F, 0xC3, 0xFF]
        var bothAccepted = 0
        for _ in 0..<3000 {
            var bytes = base
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
            }
            let ours = try? JSONValue.parse(bytes)
            let foundation = try? JSONSerialization.jsonObject(with: Data(bytes))
            if let ours, let foundation {
                bothAccepted += 1
                #expect(Self.same(ours, foundation), "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
        #expect(bothAccepted > 0)
    }

    static func same(_ value: JSONValue, _ object: Any) -> Bool {
        switch value {
        case .object(let members):
            guard let dictionary = object as? [String: Any], dictionary.count == members.count else { return false }
            return members.allSatisfy { key, member in dictionary[key].map { same(member, $0) } ?? false }
        case .array(let elements):
            guard let array = object as? [Any], array.count == elements.count else { return false }
            return zip(elements, array).allSatisfy { same($0, $1) }
        case .string(let text): return (object as? String) == text
        case .number(let number): return (object as? NSNumber).map { $0.doubleValue == number } ?? false
        case .bool(let flag): return (object as? NSNumber).map { $0.boolValue == flag } ?? false
        case .null: return object is NSNull
        }
    }
}

// MARK: The loop engine against real sockets

/// A TCP server that answers each request (read up to the end of its head and any
/// `Content-Length` body) with scripted bytes, written in the given pieces, and then either keeps
/// the connection or closes it.
final class ScriptedServer: Sendable {
    struct Reply: Sendable {
        var pieces: [String]
        var close = false
        /// Delay between pieces, so the client sees them in separate reads.
        var gap: TimeAmount = .milliseconds(5)
    }

    let connections = Atomic<Int>(0)
    let requests = Atomic<Int>(0)
    /// Connections closed for being idle (`idleClose`), counted once the close is done.
    let idleClosed = Atomic<Int>(0)
    let reply: @Sendable (Int) -> Reply
    /// Close a connection that has been idle this long after a response (nil: never).
    let idleClose: TimeAmount?

    init(idleClose: TimeAmount? = nil, reply: @escaping @Sendable (Int) -> Reply) {
        self.idleClose = idleClose
        self.reply = reply
    }

    final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let server: ScriptedServer
        var buffer: [UInt8] = []
        var idleTimer: Scheduled<Void>?
        init(server: ScriptedServer) { self.server = server }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var incoming = unwrapInboundIn(data)
            buffer += incoming.readBytes(length: incoming.readableBytes) ?? []
            idleTimer?.cancel()
            while let end = Self.requestEnd(buffer) {
                buffer.removeFirst(end)
                let n = server.requests.wrappingAdd(1, ordering: .relaxed).oldValue
                respond(context: context, server.reply(n))
            }
        }

        /// Length of the first whole request in `bytes`, if there is one.
        static func requestEnd(_ bytes: [UInt8]) -> Int? {
            let text = String(decoding: bytes, as: UTF8.self)
            guard let head = text.range(of: "\r\n\r\n") else { return nil }
            let headBytes = text[..<head.upperBound].utf8.count
            var length = 0
            for line in text[..<head.lowerBound].split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
                length = Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? 0
            }
            return bytes.count >= headBytes + length ? headBytes + length : nil
        }

        func respond(context: ChannelHandlerContext, _ reply: Reply) {
            let channel = context.channel
            let loop = context.eventLoop
            var delay = TimeAmount.zero
            for (index, piece) in reply.pieces.enumerated() {
                let last = index == reply.pieces.count - 1
                loop.scheduleTask(in: delay) {
                    channel.writeAndFlush(ByteBuffer(string: piece)).whenComplete { _ in
                        guard last else { return }
                        if reply.close {
                            channel.close(promise: nil)
                        } else if let idle = self.server.idleClose {
                            self.idleTimer = loop.scheduleTask(in: idle) {
                                channel.close().whenComplete { _ in self.server.idleClosed.wrappingAdd(1, ordering: .relaxed) }
                            }
                        }
                    }
                }
                delay = delay + reply.gap
            }
        }
    }

    /// Runs `body` with the server's base URL.
    func serve<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                self.connections.wrappingAdd(1, ordering: .relaxed)
                return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Handler(server: self)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let url = "http://127.0.0.1:\(channel.localAddress!.port!)"
        do {
            let result = try await body(url)
            try? await channel.close()
            return result
        } catch {
            try? await channel.close()
            throw error
        }
    }
}

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
