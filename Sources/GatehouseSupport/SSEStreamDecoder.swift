// The client's side of `text/event-stream` (Server-Sent Events, WHATWG HTML "Interpreting an
// event stream"): bytes in, events, comments and `retry:` hints out, in order. Incremental, so
// bytes may arrive split anywhere (inside a field, between a CR and its LF). Used by the tests'
// SSE client (GatehouseTestSupport) and by the load generator's streaming scenario.

/// One event of a `text/event-stream`, as a client receives it once a blank line dispatched it.
public struct SSEReceivedEvent: Sendable, Equatable {
    /// The `id:` field of this event's own block; nil when the block had none (the stream's last
    /// event id then stays what it was: see `SSEStreamDecoder.lastEventID`).
    public var id: String?
    /// The `event:` field; `message` when the block had none.
    public var type: String
    /// The `data:` lines, joined with "\n".
    public var data: String

    /// An event with these fields.
    public init(id: String?, type: String, data: String) {
        self.id = id
        self.type = type
        self.data = data
    }
}

/// What an event stream delivers, in the order it arrived.
public enum SSEReceivedItem: Sendable, Equatable {
    /// A dispatched event.
    case event(SSEReceivedEvent)
    /// A comment line (`: keep-alive`), without the colon and one leading space.
    case comment(String)
    /// A `retry:` field: the reconnection time in milliseconds.
    case retry(Int)
}

/// Why an event stream (or the HTTP response around it) could not be read.
public struct SSEDecodingError: Error, Equatable, CustomStringConvertible {
    /// What was wrong.
    public let description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}

/// Parses the event stream format incrementally: `feed` as bytes arrive.
///
/// Lines end with CRLF, LF or CR; a line starting with `:` is a comment; `field: value` (one
/// space after the colon dropped); `data` lines accumulate; a blank line dispatches the event
/// (nothing when no `data` line came); `id` sets the last event id (unless it contains NUL);
/// `retry` with only ASCII digits is a reconnection hint; other fields are ignored. A byte order
/// mark at the very start is skipped. A line longer than `maxLineBytes` is an error (a stream
/// that never ends a line must not grow a client without bound).
public struct SSEStreamDecoder: Sendable {
    /// The longest line accepted.
    public let maxLineBytes: Int
    /// The stream's last event id: the latest `id:` field seen (persists across events, as the
    /// `Last-Event-ID` a reconnecting client sends).
    public private(set) var lastEventID = ""
    /// Events dispatched so far.
    public private(set) var eventCount = 0
    /// Comment lines seen so far.
    public private(set) var commentCount = 0

    private var line: [UInt8] = []
    private var skipLF = false
    private var firstLine = true
    private var data: [UInt8] = []
    private var hasData = false
    private var type: String?
    private var blockID: String?

    /// A decoder at the start of a stream.
    public init(maxLineBytes: Int = 1 << 20) {
        self.maxLineBytes = maxLineBytes
        line.reserveCapacity(256)
    }

    /// Parses `bytes`, appending what they complete to `items`.
    public mutating func feed<Bytes: Sequence<UInt8>>(_ bytes: Bytes, into items: inout [SSEReceivedItem]) throws(SSEDecodingError) {
        for byte in bytes {
            switch byte {
            case 0x0A:  // LF
                if skipLF {
                    skipLF = false
                    continue
                }
                endLine(into: &items)
            case 0x0D:  // CR (an LF right after it belongs to it, even in the next feed)
                skipLF = true
                endLine(into: &items)
            default:
                skipLF = false
                guard line.count < maxLineBytes else { throw SSEDecodingError("a line longer than \(maxLineBytes) bytes") }
                line.append(byte)
            }
        }
    }

    /// Parses `bytes` and returns what they complete.
    public mutating func feed<Bytes: Sequence<UInt8>>(_ bytes: Bytes) throws(SSEDecodingError) -> [SSEReceivedItem] {
        var items: [SSEReceivedItem] = []
        try feed(bytes, into: &items)
        return items
    }

    private mutating func endLine(into items: inout [SSEReceivedItem]) {
        defer { line.removeAll(keepingCapacity: true) }
        if firstLine {
            firstLine = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        }
        if line.isEmpty {
            dispatch(into: &items)
            return
        }
        let colon = line.firstIndex(of: UInt8(ascii: ":"))
        if colon == 0 {
            var start = 1
            if line.count > 1, line[1] == 0x20 { start = 2 }
            commentCount += 1
            items.append(.comment(String(decoding: line[start...], as: UTF8.self)))
            return
        }
        let fieldEnd = colon ?? line.count
        var valueStart = colon.map { $0 + 1 } ?? line.count
        if valueStart < line.count, line[valueStart] == 0x20 { valueStart += 1 }
        let value = line[valueStart...]
        switch String(decoding: line[..<fieldEnd], as: UTF8.self) {
        case "data":
            data.append(contentsOf: value)
            data.append(0x0A)
            hasData = true
        case "event":
            type = String(decoding: value, as: UTF8.self)
        case "id":
            if !value.contains(0) {
                let id = String(decoding: value, as: UTF8.self)
                lastEventID = id
                blockID = id
            }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), value.count <= 18,
                let milliseconds = Int(String(decoding: value, as: UTF8.self))
            {
                items.append(.retry(milliseconds))
            }
        default:
            break
        }
    }

    private mutating func dispatch(into items: inout [SSEReceivedItem]) {
        defer {
            data.removeAll(keepingCapacity: true)
            hasData = false
            type = nil
            blockID = nil
        }
        guard hasData else { return }
        data.removeLast()  // the LF after the last data line
        eventCount += 1
        items.append(.event(SSEReceivedEvent(id: blockID, type: type.flatMap { $0.isEmpty ? nil : $0 } ?? "message", data: String(decoding: data, as: UTF8.self))))
    }
}
