import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One Server-Sent Event as the gateway sends it.
struct ServerSentEvent: Sendable, Equatable {
    var name: String = "message"
    var data: String = ""
    var id: String?
    var retry: Int?
}

/// The text/event-stream parser (WHATWG HTML "Server-sent events"): bytes in, events out.
struct ServerSentEventParser {
    private var buffer: [UInt8] = []
    private var pending = ServerSentEvent()
    private var hasData = false
    private var sawCarriageReturn = false

    /// The events completed by `bytes`.
    mutating func feed<Bytes: Sequence>(_ bytes: Bytes) -> [ServerSentEvent] where Bytes.Element == UInt8 {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if sawCarriageReturn {
                sawCarriageReturn = false
                if byte == UInt8(ascii: "\n") { continue }
            }
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") {
                sawCarriageReturn = byte == UInt8(ascii: "\r")
                if let event = line(String(decoding: buffer, as: UTF8.self)) { events.append(event) }
                buffer.removeAll(keepingCapacity: true)
            } else {
                buffer.append(byte)
            }
        }
        return events
    }

    private mutating func line(_ line: String) -> ServerSentEvent? {
        if line.isEmpty {
            defer {
                pending = ServerSentEvent(name: "message", data: "", id: nil, retry: nil)
                hasData = false
            }
            // An event without data still carries its id and retry; one without anything is nothing.
            guard hasData || pending.id != nil || pending.retry != nil || pending.name != "message" else { return nil }
            return pending
        }
        if line.hasPrefix(":") { return nil }
        let field: Substring
        var value: Substring
        if let colon = line.firstIndex(of: ":") {
            field = line[..<colon]
            value = line[line.index(after: colon)...]
            if value.hasPrefix(" ") { value = value.dropFirst() }
        } else {
            field = Substring(line)
            value = ""
        }
        switch field {
        case "event": pending.name = String(value)
        case "data":
            pending.data = hasData ? pending.data + "\n" + value : String(value)
            hasData = true
        case "id": if !value.contains("\0") { pending.id = String(value) }
        case "retry": if let milliseconds = Int(value) { pending.retry = milliseconds }
        default: break
        }
        return nil
    }
}

/// One `text/event-stream` response read as it arrives (a URLSession data delegate, which
/// works on Apple platforms and on Linux alike).
final class EventSourceConnection: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    enum Item: Sendable {
        /// The response arrived with this status.
        case opened(status: Int, headers: [String: String])
        /// An event (status 200 only).
        case event(ServerSentEvent)
        /// The whole body of a response that is not 200 (a problem).
        case refused(body: Data)
    }

    private let lock = NSLock()
    private var parser = ServerSentEventParser()
    private var status = 0
    private var refusedBody = Data()
    private let continuation: AsyncThrowingStream<Item, any Error>.Continuation
    private var session: URLSession?
    private var task: URLSessionDataTask?

    /// The items of the response to `request`; cancelling their consumer cancels the request.
    /// The session is made from `base` (the app's: its proxy, protocol classes, headers and TLS
    /// settings apply), with a delegate of its own.
    static func open(_ request: URLRequest, base: URLSessionConfiguration, idleTimeout: TimeInterval) -> AsyncThrowingStream<Item, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Item.self)
        let connection = EventSourceConnection(continuation: continuation)
        // A copy: the app's own configuration object is not changed.
        let configuration = (base.copy() as? URLSessionConfiguration) ?? .default
        configuration.timeoutIntervalForRequest = idleTimeout
        configuration.timeoutIntervalForResource = 7 * 24 * 3600
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let session = URLSession(configuration: configuration, delegate: connection, delegateQueue: nil)
        let task = session.dataTask(with: request)
        connection.lock.withLock {
            connection.session = session
            connection.task = task
        }
        continuation.onTermination = { _ in connection.cancel() }
        task.resume()
        return stream
    }

    private init(continuation: AsyncThrowingStream<Item, any Error>.Continuation) {
        self.continuation = continuation
    }

    private func cancel() {
        let (task, session) = lock.withLock { (self.task, self.session) }
        task?.cancel()
        session?.invalidateAndCancel()
    }

    /// Reports the response once, from the task (not from `didReceive response:`, whose
    /// completion handler's type differs between the platforms' SDKs: a near miss would never be
    /// called).
    private func openIfNeeded(_ task: URLSessionTask) {
        guard let http = task.response as? HTTPURLResponse else { return }
        let first = lock.withLock {
            guard status == 0 else { return false }
            status = http.statusCode
            return true
        }
        guard first else { return }
        continuation.yield(.opened(status: http.statusCode, headers: http.lowercasedHeaders))
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        openIfNeeded(dataTask)
        let events: [ServerSentEvent] = lock.withLock {
            guard status == 200 else {
                if refusedBody.count < 65_536 { refusedBody.append(data) }
                return []
            }
            return parser.feed(data)
        }
        for event in events { continuation.yield(.event(event)) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if error == nil { openIfNeeded(task) }
        let (status, body) = lock.withLock { (self.status, refusedBody) }
        if let error {
            let code = (error as? URLError)?.code ?? .unknown
            continuation.finish(throwing: GatehouseError.network(code: code.rawValue, message: error.localizedDescription))
        } else {
            if status != 200 { continuation.yield(.refused(body: body)) }
            continuation.finish()
        }
        session.finishTasksAndInvalidate()
    }
}
