import Foundation
import GatehouseContracts
import GatehouseTestSupport
import Synchronization

@testable import Gateway

/// One SSE block as read off the wire.
struct WireEvent: Sendable, CustomStringConvertible {
    var id: String?
    var event: String?
    var data: String?
    var retry: String?
    var comment: String?

    var json: [String: Any] { data.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } ?? [:] }
    var description: String { "id=\(id ?? "-") event=\(event ?? "-") data=\(data ?? "-") retry=\(retry ?? "-") comment=\(comment ?? "-")" }
}

/// A raw-socket client of `GET /v1/me/events`: sends the request, decodes the chunked body and
/// parses the SSE blocks.
final class StreamClient: @unchecked Sendable {
    let connection: RawConnection
    private var taken = 0

    static func open(
        port: Int, token: String?, lastEventID: String? = nil, query: String = "", receiveBuffer: Int32? = nil
    ) async throws -> StreamClient {
        let connection = try await RawConnection.open(port: port)
        if var size = receiveBuffer {
            setsockopt(connection.fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var head = "GET /v1/me/events\(query) HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        if let lastEventID { head += "Last-Event-ID: \(lastEventID)\r\n" }
        try await connection.send(head + "\r\n")
        return StreamClient(connection: connection)
    }

    init(connection: RawConnection) { self.connection = connection }

    /// Status line and headers once they arrived.
    func head(timeout: Duration = .seconds(20)) async throws -> (status: Int, headers: [String: String]) {
        var result: (Int, [String: String])?
        try await waitUntil("the response head", timeout: timeout) {
            result = parse().head
            return result != nil || connection.closed
        }
        guard let result else { throw StreamClientError("closed before a response head") }
        return result
    }

    /// The whole response when it is not a stream (an error).
    func response() async throws -> RawResponse { try await connection.response() }

    /// The next SSE block (comments included when `comments`).
    func next(comments: Bool = false, timeout: Duration = .seconds(20)) async throws -> WireEvent {
        var found: WireEvent?
        try await waitUntil("the next event", timeout: timeout) {
            let events = parse().events
            while taken < events.count {
                let event = events[taken]
                taken += 1
                if comments || event.comment == nil {
                    found = event
                    return true
                }
            }
            return connection.closed
        }
        guard let found else { throw StreamClientError("closed without another event; got \(String(decoding: connection.unread, as: UTF8.self))") }
        return found
    }

    /// Events parsed but not yet taken (no waiting).
    func pending() -> [WireEvent] { Array(parse().events.dropFirst(taken)).filter { $0.comment == nil } }

    /// Whether the chunked body ended (the last chunk arrived).
    var ended: Bool { parse().ended }

    func waitForEnd(timeout: Duration = .seconds(20)) async throws {
        try await waitUntil("the end of the stream", timeout: timeout) { parse().ended || connection.closed }
    }

    private func parse() -> (head: (Int, [String: String])?, events: [WireEvent], ended: Bool) {
        let bytes = connection.unread
        let separator = Array("\r\n\r\n".utf8)
        guard let end = (0..<max(0, bytes.count - 3)).first(where: { bytes[$0..<($0 + 4)].elementsEqual(separator) }) else {
            return (nil, [], false)
        }
        let lines = String(decoding: bytes[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        guard headers["transfer-encoding"] == "chunked" else { return ((status, headers), [], false) }
        // Chunked body.
        var body: [UInt8] = []
        var i = end + 4
        var ended = false
        while i < bytes.count {
            guard let lineEnd = (i..<max(i, bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }) else { break }
            guard let size = Int(String(decoding: bytes[i..<lineEnd], as: UTF8.self), radix: 16) else { break }
            if size == 0 {
                ended = true
                break
            }
            let start = lineEnd + 2
            guard bytes.count >= start + size + 2 else { break }
            body += bytes[start..<(start + size)]
            i = start + size + 2
        }
        var events: [WireEvent] = []
        let text = String(decoding: body, as: UTF8.self)
        var blocks = text.components(separatedBy: "\n\n")
        blocks.removeLast()  // incomplete (or empty) tail
        for block in blocks {
            var event = WireEvent()
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix(":") {
                    event.comment = String(line.dropFirst()).trimmingCharacters(in: .whitespaces)
                    continue
                }
                guard let colon = line.firstIndex(of: ":") else { continue }
                var value = line[line.index(after: colon)...]
                if value.hasPrefix(" ") { value = value.dropFirst() }
                switch line[..<colon] {
                case "id": event.id = String(value)
                case "event": event.event = String(value)
                case "data": event.data = (event.data.map { $0 + "\n" } ?? "") + value
                case "retry": event.retry = String(value)
                default: break
                }
            }
            events.append(event)
        }
        return ((status, headers), events, ended)
    }
}

/// The identity service's change log, faked: changes are numbered, published on the feed
/// (or lost on the way), and answered by `identity.userChanges` and `identity.listChanges` as
/// PROTOCOL.md describes.
final class FakeChangeLog: Sendable {
    private struct State {
        var changes: [UserChange] = []
        var head: UInt64 = 0
        var feeds: [AsyncStream<ChangeNotice>.Continuation] = []
        var names: [String: String] = [:]
        /// What `listChanges` answers as `resyncUserIDs` (the per-user cap pruned their changes).
        var resyncUserIDs: [String] = []
    }
    private let state = Mutex(State())
    let createdAt = Date(timeIntervalSince1970: 1_700_000_000)

    func subscribe() -> AsyncStream<ChangeNotice> {
        let (stream, continuation) = AsyncStream.makeStream(of: ChangeNotice.self)
        state.withLock { $0.feeds.append(continuation) }
        return stream
    }

    var subscriptions: Int { state.withLock { $0.feeds.count } }
    var head: UInt64 { state.withLock { $0.head } }

    func user(_ id: String) -> User {
        User(id: id, email: "\(id)@example.com", displayName: state.withLock { $0.names[id] } ?? "", createdAt: createdAt)
    }

    /// Commits a change of `userID` (a `profile` change sets its display name); publishes it unless `publish` is false.
    @discardableResult
    func commit(_ userID: String, _ kinds: [String] = [UserChange.Kind.profile], name: String? = nil, publish: Bool = true) -> UserChange {
        let change = state.withLock { s in
            s.head += 1
            if let name { s.names[userID] = name }
            let terminal = kinds.contains(UserChange.Kind.deleted) || kinds.contains(UserChange.Kind.migrated)
            let user = terminal ? nil : User(id: userID, email: "\(userID)@example.com", displayName: s.names[userID] ?? "", createdAt: createdAt)
            let change = UserChange(seq: s.head, userID: userID, kinds: kinds, occurredAt: Date(timeIntervalSince1970: 1_700_000_000.25), user: user)
            s.changes.append(change)
            return change
        }
        if publish { self.publish(.changed(change)) }
        return change
    }

    func publish(_ notice: ChangeNotice) {
        for feed in state.withLock({ $0.feeds }) { feed.yield(notice) }
    }

    func heartbeat() { publish(.heartbeat(ChangeFeedHeartbeat(seq: head))) }

    /// The log restored from a backup taken at `seq`: the changes after it are gone.
    func restore(to seq: UInt64) {
        state.withLock { s in
            s.changes.removeAll { $0.seq > seq }
            s.head = seq
        }
    }

    /// Makes `listChanges` answer that the per-user cap pruned these users' changes.
    func capPruned(_ userIDs: [String]) { state.withLock { $0.resyncUserIDs = userIDs } }

    func userChanges(_ request: UserChangesRequest) -> UserChangesResponse {
        state.withLock { s in
            let user = User(id: request.userID, email: "\(request.userID)@example.com", displayName: s.names[request.userID] ?? "", createdAt: createdAt)
            guard request.resume else { return UserChangesResponse(user: user, head: s.head) }
            if request.afterSeq > s.head { return UserChangesResponse(user: user, head: s.head, resync: true) }
            let changes = s.changes.filter { $0.userID == request.userID && $0.seq > request.afterSeq }
            return UserChangesResponse(head: s.head, changes: changes)
        }
    }

    func listChanges(_ request: ListChangesRequest) -> ListChangesResponse {
        state.withLock { s in
            let limit = request.limit == 0 ? Int(IdentityAPI.maxChangesPage) : Int(request.limit)
            return ListChangesResponse(
                changes: Array(s.changes.filter { $0.seq > request.afterSeq && !s.resyncUserIDs.contains($0.userID) }.prefix(limit)),
                head: s.head, resyncUserIDs: s.resyncUserIDs)
        }
    }

    /// Serves `identity.userChanges` and `identity.listChanges` from this log.
    func install(on services: InProcessServices) {
        services.override(IdentityAPI.userChanges) { [self] in userChanges($0) }
        services.override(IdentityAPI.listChanges) { [self] in listChanges($0) }
    }
}

extension Harness {
    /// Streams open on the gateway (`gatehouse_event_streams`).
    var openStreams: Double { metric("gatehouse_event_streams") ?? -1 }

    func closedCount(_ reason: String) -> Double { metric("gatehouse_event_streams_closed_total{reason=\"\(reason)\"}") ?? 0 }
}

struct StreamClientError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
