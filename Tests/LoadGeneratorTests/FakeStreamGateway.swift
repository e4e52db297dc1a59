import Foundation
import GatehouseSupport
import GatehouseTestSupport
import Hummingbird
import Logging
import Synchronization
import Testing
@testable import LoadGenerator
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A stand-in for the gateway's streaming side: anonymous sign-up, `PATCH /v1/me` (settings)
/// and `GET /v1/me/events` (chunked `text/event-stream`: retry, a snapshot, then one `change`
/// per PATCH of the user), with faults to inject: some changes never sent, some sent twice.
final class FakeStreamGateway: Sendable {
    struct State {
        var users: [String: String] = [:]  // token → user id
        var streams: [String: [AsyncStream<ByteBuffer>.Continuation]] = [:]
        var seq = 0
        var changes = 0
        var openStreams = 0
    }

    let state = Mutex(State())
    /// Every `dropEvery`-th change is not sent to the streams (0: none).
    let dropEvery: Int
    /// Every `duplicateEvery`-th change is sent twice (0: none).
    let duplicateEvery: Int

    init(dropEvery: Int = 0, duplicateEvery: Int = 0) {
        self.dropEvery = dropEvery
        self.duplicateEvery = duplicateEvery
    }

    static func occurredAt() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date())
    }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.post("/v1/accounts/anonymous") { _, _ in
            let id = UUID().uuidString
            let token = "at-\(id)"
            self.state.withLock { $0.users[token] = id }
            return FakeGateway.json(.created, [
                "user": ["id": id, "isAnonymous": true],
                "session": ["accessToken": token, "refreshToken": "rt", "tokenType": "Bearer", "expiresIn": 900],
            ])
        }
        router.patch("/v1/me") { request, context in
            let token = String((request.headers[.authorization] ?? "").dropFirst(7))
            let body = try await request.body.collect(upTo: 4096)
            let json = try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
            let n = (json?["settings"] as? [String: Any])?["n"] as? Int ?? -1
            return self.state.withLock { state -> Response in
                guard let id = state.users[token] else { return FakeGateway.problem(.unauthorized, "invalid_token") }
                state.seq += 1
                state.changes += 1
                let data = #"{"changes":["settings"],"user":{"id":"\#(id)","settings":{"n":\#(n)}},"occurredAt":"\#(Self.occurredAt())"}"#
                let event = ByteBuffer(string: "id: \(state.seq)\nevent: change\ndata: \(data)\n\n")
                if self.dropEvery == 0 || state.changes % self.dropEvery != 0 {
                    let copies = self.duplicateEvery > 0 && state.changes % self.duplicateEvery == 0 ? 2 : 1
                    for stream in state.streams[id] ?? [] {
                        for _ in 0..<copies { stream.yield(event) }
                    }
                }
                return FakeGateway.json(.ok, ["id": id, "settings": ["n": n]])
            }
        }
        router.get("/v1/me/events") { request, _ in
            let token = String((request.headers[.authorization] ?? "").dropFirst(7))
            let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream()
            return self.state.withLock { state -> Response in
                guard let id = state.users[token] else { return FakeGateway.problem(.unauthorized, "invalid_token") }
                continuation.yield(ByteBuffer(string: "retry: 1000\n\nid: \(state.seq)\nevent: snapshot\ndata: {\"user\":{\"id\":\"\(id)\",\"settings\":{}},\"resync\":false}\n\n: keep-alive\n\n"))
                state.streams[id, default: []].append(continuation)
                state.openStreams += 1
                return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"], body: ResponseBody(asyncSequence: stream))
            }
        }
        return router
    }

    /// Ends every stream (before the server stops).
    func finishStreams() {
        state.withLock { state in
            for continuation in state.streams.values.flatMap({ $0 }) { continuation.finish() }
            state.streams = [:]
        }
    }

    /// Starts the fake on 127.0.0.1 with an ephemeral port, runs `body` with its base URL, stops it.
    func serve<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "fake-stream-gateway")
        logger.logLevel = .critical
        let app = Application(
            router: router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                continuation.yield(channel.localAddress?.port ?? 0)
                continuation.finish()
            }, logger: logger)
        let server = Task { try await app.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            server.cancel()
            throw CancellationError()
        }
        let result = await Result { try await body("http://127.0.0.1:\(port)") }
        finishStreams()
        server.cancel()
        _ = await server.result
        return try result.get()
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

@Suite("The stream scenario against a fake gateway")
struct StreamRunnerTests {
    static func config(_ url: String, streams: Int = 12, rate: Double = 400, duration: Double = 0.5) -> StreamLoadConfiguration {
        var config = StreamLoadConfiguration(url: url, streams: streams, rate: rate, duration: duration)
        config.threads = 2
        config.concurrency = 8
        config.openWindow = 4
        config.drain = 3
        config.gatewayPID = getpid()
        return config
    }

    @Test("opens every stream on two loop threads, makes rate × duration changes, and finds each delivered once")
    func cleanRun() async throws {
        let fake = FakeStreamGateway()
        let result = try await fake.serve { url in try await StreamLoadRunner(Self.config(url)).run() }
        #expect(result.opened == 12 && result.openFailures.isEmpty)
        #expect(result.changesSent == 200 && result.changesOK == 200, "\(result.changeFailures)")
        #expect(result.events == StreamEventTally(expected: 200, received: 200, matched: 200, lost: 0, unexpected: 0, duplicates: 0, unreadable: 0))
        #expect(result.deliveryLatencyMs.count == 200)
        #expect(result.heartbeats == 12)
        #expect(result.droppedStreams == 0 && result.closedByServer.isEmpty)
        #expect(!result.hadErrors)
        #expect(result.gatewayRSSBeforeKiB != nil && result.gatewayKiBPerStream != nil)
        #expect(fake.state.withLock { $0.openStreams } == 12)
        #expect(result.textReport().contains("expected 200, received 200, lost 0, duplicates 0"))
    }

    @Test("a change never delivered counts as lost, one delivered twice as a duplicate")
    func lostAndDuplicated() async throws {
        let fake = FakeStreamGateway(dropEvery: 10, duplicateEvery: 7)
        let result = try await fake.serve { url in try await StreamLoadRunner(Self.config(url, streams: 4, rate: 200, duration: 0.5)).run() }
        #expect(result.changesOK == 100)
        // 10 dropped (every 10th); every 7th not dropped is sent twice (7, 14, …, 98 except 70: 13).
        #expect(result.events.lost == 10 && result.events.duplicates == 13 && result.events.received == 90, "\(result.events)")
        #expect(result.hadErrors)
    }

    @Test("a sign-up that is refused (404) fails the setup with a clear message, before any stream opens")
    func refusedSetup() async throws {
        let fake = FakeStreamGateway()
        // A path prefix that does not exist: every request is a 404 from the router, sign-up included.
        let failure = await Result { try await fake.serve { url in try await StreamLoadRunner(Self.config(url + "/nowhere", streams: 2)).run() } }
        guard case .failure(let error) = failure else {
            Issue.record("setup should fail when sign-up answers 404")
            return
        }
        #expect("\(error)".contains("anonymous user"))
    }
}

@Suite("The tests' SSEClient against a real HTTP server (chunked event stream)")
struct SSEClientTests {
    static func request(_ url: String, _ method: String, _ path: String, bearer: String? = nil, json: String? = nil) async throws -> [String: Any] {
        var request = URLRequest(url: URL(string: url + path)!)
        request.httpMethod = method
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        if let json {
            request.httpBody = Data(json.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, _) = try await URLSession.shared.data(for: request)
        return (try JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }

    @Test("head, retry, snapshot, comment, live changes, a refusal with its problem body, and the server's end of the stream")
    func readsAStream() async throws {
        let fake = FakeStreamGateway()
        try await fake.serve { url in
            let port = try #require(URLComponents(string: url)?.port)
            let created = try await Self.request(url, "POST", "/v1/accounts/anonymous")
            let token = try #require((created["session"] as? [String: Any])?["accessToken"] as? String)
            let userID = try #require((created["user"] as? [String: Any])?["id"] as? String)

            let stream = try await SSEClient.connect(port: port, bearer: token, lastEventID: "0")
            #expect(stream.status == 200 && stream.isEventStream)
            #expect(stream.head?.headers["cache-control"] == "no-store")
            let snapshot = try await stream.next()
            #expect(snapshot.type == "snapshot" && snapshot.seq == 0 && (snapshot.json["user"] as? [String: Any])?["id"] as? String == userID)
            #expect(stream.retries == [1000])
            try await stream.waitForComments(1)
            #expect(stream.comments == ["keep-alive"])
            for n in 1...3 { _ = try await Self.request(url, "PATCH", "/v1/me", bearer: token, json: #"{"settings":{"n":\#(n)}}"#) }
            let changes = try await stream.next(3)
            #expect(changes.map(\.type) == ["change", "change", "change"])
            #expect(changes.map(\.seq) == [1, 2, 3] && stream.lastEventID == "3")
            #expect(stream.pending().isEmpty && !stream.isClosed)

            let refused = try await SSEClient.connect(port: port, bearer: "nope")
            #expect(refused.status == 401 && !refused.isEventStream)
            #expect(refused.response.json["code"] as? String == "invalid_token")

            fake.finishStreams()
            try await stream.waitForClose()
            #expect(stream.endedCleanly)
            await #expect(throws: SSEStreamEnded.self) { _ = try await stream.next(timeout: .seconds(1)) }
            #expect(stream.received.count == 4)
        }
    }
}
