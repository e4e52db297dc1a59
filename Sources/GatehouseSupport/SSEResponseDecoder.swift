import Foundation

// The HTTP/1.1 response around an event stream, read incrementally: the head (status line and
// header fields), then the body by its framing (chunked, Content-Length, or until the close);
// a 200 `text/event-stream` body goes through `SSEStreamDecoder`, any other body (a problem+json
// error) is kept whole.

/// The status line and header fields of a response.
public struct SSEResponseHead: Sendable, Equatable {
    /// The status code.
    public var status: Int
    /// Header fields by lowercased name (repeated fields joined with ", ").
    public var headers: [String: String]

    /// Whether the body is an event stream: status 200 and `Content-Type: text/event-stream`.
    public var isEventStream: Bool {
        status == 200 && (headers["content-type"]?.lowercased().hasPrefix("text/event-stream") ?? false)
    }
}

/// Reads one response to `GET` of an event stream as its bytes arrive: `feed` each read, and
/// `finish` when the connection has closed.
public struct SSEResponseDecoder: Sendable {
    /// The longest head accepted.
    public static let maxHeadBytes = 64 << 10
    /// The largest body kept when the response is not an event stream.
    public static let maxPlainBody = 1 << 20

    /// The head, once it has arrived whole.
    public private(set) var head: SSEResponseHead?
    /// The body of a response that is not an event stream (so far).
    public private(set) var body: [UInt8] = []
    /// True once the body ended by its own framing (the last chunk, or Content-Length bytes): the
    /// server ended the response cleanly.
    public private(set) var isComplete = false
    /// The event stream's parser (its last event id and counts).
    public private(set) var events: SSEStreamDecoder

    private enum Framing { case chunked, length(Int), untilClose }
    private enum ChunkState { case size, data(Int), dataEnd, trailer }
    private var headBytes: [UInt8] = []
    private var framing = Framing.untilClose
    private var chunkState = ChunkState.size
    private var chunkLine: [UInt8] = []

    /// A decoder waiting for the head; `maxLineBytes` bounds a line of the event stream.
    public init(maxLineBytes: Int = 1 << 20) {
        events = SSEStreamDecoder(maxLineBytes: maxLineBytes)
    }

    /// Parses `bytes`, appending the event-stream items they complete to `items`.
    public mutating func feed(_ bytes: [UInt8], into items: inout [SSEReceivedItem]) throws(SSEDecodingError) {
        var index = 0
        if head == nil {
            index = try readHead(bytes)
            guard head != nil else { return }
        }
        try readBody(bytes, from: index, into: &items)
    }

    /// Parses `bytes` and returns the event-stream items they complete.
    public mutating func feed(_ bytes: [UInt8]) throws(SSEDecodingError) -> [SSEReceivedItem] {
        var items: [SSEReceivedItem] = []
        try feed(bytes, into: &items)
        return items
    }

    /// The connection closed: a body framed by the close is complete now; a head or a framed
    /// body cut short is not (`isComplete` stays false).
    public mutating func finish() {
        if head != nil, case .untilClose = framing { isComplete = true }
    }

    // MARK: Head

    /// Reads head bytes from `bytes`; returns where the body starts (or `bytes.count`).
    private mutating func readHead(_ bytes: [UInt8]) throws(SSEDecodingError) -> Int {
        let before = headBytes.count
        headBytes.append(contentsOf: bytes)
        // Search from a little before the new bytes (the separator may straddle two reads).
        var i = max(before - 3, 0)
        while i + 3 < headBytes.count {
            if headBytes[i] == 0x0D, headBytes[i + 1] == 0x0A, headBytes[i + 2] == 0x0D, headBytes[i + 3] == 0x0A {
                try parseHead(headBytes[..<i])
                let bodyStart = i + 4 - before
                headBytes = []
                return bodyStart
            }
            i += 1
        }
        guard headBytes.count <= Self.maxHeadBytes else { throw SSEDecodingError("a response head over \(Self.maxHeadBytes) bytes") }
        return bytes.count
    }

    private mutating func parseHead(_ bytes: ArraySlice<UInt8>) throws(SSEDecodingError) {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.isEmpty ? [] : lines.removeFirst().split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]), (100...599).contains(status) else {
            throw SSEDecodingError("not an HTTP/1.x status line: \(text.prefix(80))")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw SSEDecodingError("a header line without a colon: \(line.prefix(80))") }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        let parsed = SSEResponseHead(status: status, headers: headers)
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            framing = .chunked
        } else if let length = headers["content-length"] {
            guard let count = Int(length), count >= 0 else { throw SSEDecodingError("a bad Content-Length: \(length)") }
            framing = .length(count)
        } else if status == 204 || status == 304 {
            framing = .length(0)
        } else {
            framing = .untilClose
        }
        head = parsed
        if case .length(0) = framing { isComplete = true }
    }

    // MARK: Body

    private mutating func readBody(_ bytes: [UInt8], from start: Int, into items: inout [SSEReceivedItem]) throws(SSEDecodingError) {
        var index = start
        switch framing {
        case .untilClose:
            try deliver(bytes[index...], into: &items)
        case .length(let remaining):
            let take = min(remaining, bytes.count - index)
            try deliver(bytes[index..<(index + take)], into: &items)
            framing = .length(remaining - take)
            if remaining - take == 0 { isComplete = true }
        case .chunked:
            while index < bytes.count, !isComplete {
                switch chunkState {
                case .size:
                    guard let line = try readChunkLine(bytes, &index) else { break }
                    let digits = line.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
                    guard !digits.isEmpty, digits.count <= 15, let size = Int(digits, radix: 16) else {
                        throw SSEDecodingError("a bad chunk size line: \(line.prefix(40))")
                    }
                    chunkState = size == 0 ? .trailer : .data(size)
                case .data(let remaining):
                    let take = min(remaining, bytes.count - index)
                    try deliver(bytes[index..<(index + take)], into: &items)
                    index += take
                    chunkState = remaining - take == 0 ? .dataEnd : .data(remaining - take)
                case .dataEnd:
                    guard let line = try readChunkLine(bytes, &index) else { break }
                    guard line.isEmpty else { throw SSEDecodingError("chunk data longer than its size") }
                    chunkState = .size
                case .trailer:
                    guard let line = try readChunkLine(bytes, &index) else { break }
                    if line.isEmpty { isComplete = true }
                }
            }
        }
    }

    /// Collects one LF-ended line of the chunked framing (a CR before the LF dropped); the line
    /// once whole, nil when `bytes` ran out first. Advances `index`.
    private mutating func readChunkLine(_ bytes: [UInt8], _ index: inout Int) throws(SSEDecodingError) -> String? {
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == 0x0A {
                if chunkLine.last == 0x0D { chunkLine.removeLast() }
                defer { chunkLine.removeAll(keepingCapacity: true) }
                return String(decoding: chunkLine, as: UTF8.self)
            }
            guard chunkLine.count < 4096 else { throw SSEDecodingError("a chunk framing line over 4096 bytes") }
            chunkLine.append(byte)
        }
        return nil
    }

    private mutating func deliver(_ bytes: ArraySlice<UInt8>, into items: inout [SSEReceivedItem]) throws(SSEDecodingError) {
        guard !bytes.isEmpty else { return }
        if head?.isEventStream == true {
            try events.feed(bytes, into: &items)
        } else {
            guard body.count + bytes.count <= Self.maxPlainBody else { throw SSEDecodingError("a response body over \(Self.maxPlainBody) bytes") }
            body.append(contentsOf: bytes)
        }
    }
}
