import Foundation
import GatehouseSupport

#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// A test client of `GET /v1/me/events` (or any event stream) over a raw TCP socket: sends the
/// request with the given headers, reads the head (or a whole problem+json answer), then parses
/// the event stream as it arrives (`SSEResponseDecoder`: chunked framing, `retry:`, `id:`,
/// `event:`, multi-line `data:`, comments). Never blocks a thread: reading is non-blocking and
/// waiting goes through `waitUntil`.
public final class SSEClient: @unchecked Sendable {
    /// The connection (its socket, for tests that tune it).
    public let connection: RawConnection
    private var decoder = SSEResponseDecoder()
    private var queue: [SSEReceivedEvent] = []
    /// Every event received so far, in order (also those already taken by `next`).
    public private(set) var received: [SSEReceivedEvent] = []
    /// Comment lines received so far (`keep-alive`).
    public private(set) var comments: [String] = []
    /// The `retry:` hints received so far.
    public private(set) var retries: [Int] = []
    /// True once the connection ended: the server closed it (end of input, a reset) or ended the
    /// chunked body with its last chunk.
    public private(set) var isClosed = false
    /// What went wrong reading the stream, if anything (the connection is then treated as closed).
    public private(set) var failure: SSEDecodingError?

    private init(connection: RawConnection) { self.connection = connection }

    /// Connects to the gateway at `127.0.0.1:port`, sends `GET path` with `Authorization: Bearer`
    /// (when `bearer` is given), `Last-Event-ID` (when given) and `headers`, and waits until the
    /// head has arrived (and, for an answer that is not an event stream, its whole body).
    /// `receiveBuffer` sets SO_RCVBUF before the request goes (a slow reader's small window).
    public static func connect(
        port: Int, path: String = "/v1/me/events", bearer: String? = nil, lastEventID: String? = nil,
        headers: [(String, String)] = [], receiveBuffer: Int? = nil, timeout: Duration = .seconds(10)
    ) async throws -> SSEClient {
        let connection = try await RawConnection.open(port: port)
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(connection.fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        let client = SSEClient(connection: connection)
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n"
        if let bearer { request += "Authorization: Bearer \(bearer)\r\n" }
        if let lastEventID { request += "Last-Event-ID: \(lastEventID)\r\n" }
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        try await connection.send(request)
        try await waitUntil("the head of the answer to GET \(path)", timeout: timeout) {
            client.pump()
            guard let head = client.head else { return client.isClosed }
            return head.isEventStream || client.decoder.isComplete || client.isClosed
        }
        guard client.head != nil else {
            throw RawError("GET \(path): the connection ended before a response head (\(client.failure?.description ?? "closed"))")
        }
        return client
    }

    /// The response head (status and header fields), once arrived.
    public var head: SSEResponseHead? { decoder.head }
    /// The status code (0 before the head).
    public var status: Int { decoder.head?.status ?? 0 }
    /// Whether the answer is an event stream (200, `text/event-stream`).
    public var isEventStream: Bool { decoder.head?.isEventStream ?? false }
    /// The answer as a `RawResponse` (status, headers, the body of an answer that is not an
    /// event stream), for `problemMismatches`.
    public var response: RawResponse {
        RawResponse(status: status, headers: decoder.head?.headers ?? [:], body: decoder.body)
    }
    /// The stream's last event id (the latest `id:` field), what a reconnect sends.
    public var lastEventID: String { decoder.events.lastEventID }
    /// Whether the server ended the chunked body with its last chunk (a clean end, not a reset).
    public var endedCleanly: Bool { decoder.isComplete }

    /// Why there are no events: the answer was not an event stream.
    private var notAStream: SSEDecodingError {
        SSEDecodingError("the answer is \(status) \(decoder.head?.headers["content-type"] ?? "without a content type"), not an event stream: \(String(decoding: decoder.body.prefix(300), as: UTF8.self))")
    }

    /// Reads whatever has arrived and parses it; true when something changed.
    @discardableResult
    public func pump() -> Bool {
        guard !isClosed else { return false }
        var changed = false
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !isClosed {
            let n = buffer.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                changed = true
                var items: [SSEReceivedItem] = []
                do {
                    try decoder.feed(Array(buffer[0..<n]), into: &items)
                } catch {
                    failure = error
                    isClosed = true
                }
                for item in items {
                    switch item {
                    case .event(let event):
                        queue.append(event)
                        received.append(event)
                    case .comment(let text): comments.append(text)
                    case .retry(let milliseconds): retries.append(milliseconds)
                    }
                }
                if decoder.isComplete, decoder.head?.isEventStream == true { isClosed = true }
            } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                decoder.finish()
                isClosed = true
                changed = true
            } else {
                break
            }
        }
        return changed
    }

    /// The next event not yet taken, waiting up to `timeout`; throws `SSEStreamEnded` when the
    /// connection ended first, `WaitTimedOut` when nothing came.
    public func next(timeout: Duration = .seconds(10)) async throws -> SSEReceivedEvent {
        guard isEventStream else { throw SSEStreamEnded(failure: notAStream, received: 0) }
        try await waitUntil("the next event of the stream", timeout: timeout) {
            pump()
            return !queue.isEmpty || isClosed
        }
        guard !queue.isEmpty else { throw SSEStreamEnded(failure: failure, received: received.count) }
        return queue.removeFirst()
    }

    /// The next `count` events (see `next`).
    public func next(_ count: Int, timeout: Duration = .seconds(10)) async throws -> [SSEReceivedEvent] {
        var events: [SSEReceivedEvent] = []
        for _ in 0..<count { events.append(try await next(timeout: timeout)) }
        return events
    }

    /// Events that arrived and were not taken yet, without waiting.
    public func pending() -> [SSEReceivedEvent] {
        pump()
        defer { queue.removeAll() }
        return queue
    }

    /// Waits until the server ends the connection (events still arriving are kept for `next`).
    public func waitForClose(timeout: Duration = .seconds(10)) async throws {
        try await waitUntil("the server ending the stream", timeout: timeout) {
            pump()
            return isClosed
        }
    }

    /// Waits until at least `count` comment lines have arrived.
    public func waitForComments(_ count: Int, timeout: Duration = .seconds(10)) async throws {
        guard isEventStream else { throw SSEStreamEnded(failure: notAStream, received: 0) }
        try await waitUntil("\(count) comment lines", timeout: timeout) {
            pump()
            return comments.count >= count || isClosed
        }
        guard comments.count >= count else { throw SSEStreamEnded(failure: failure, received: received.count) }
    }

    /// Ends the connection from the client's side: closes the socket, as a client that goes
    /// away does (unread events make it a reset).
    public func disconnect() {
        connection.closeSocket()
        isClosed = true
    }
}

/// Thrown by `SSEClient.next` when the stream ended before another event came.
public struct SSEStreamEnded: Error, CustomStringConvertible {
    /// What went wrong reading, if the end was a parse failure.
    public var failure: SSEDecodingError?
    /// Events received before the end.
    public var received: Int
    /// Says so.
    public var description: String {
        "the stream ended after \(received) events" + (failure.map { " (\($0.description))" } ?? "")
    }
}

extension SSEReceivedEvent {
    /// The data as a JSON object (empty when it is not one).
    public var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:]
    }

    /// The id as a number (nil without an id, or when it is not a decimal UInt64).
    public var seq: UInt64? { id.flatMap { UInt64($0) } }
}
