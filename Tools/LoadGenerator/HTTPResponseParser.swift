/// An incremental HTTP/1.1 response parser for the `loop` engine (pure: no I/O).
///
/// It is handed the bytes received so far on a connection, from the start of the response, and
/// says whether a whole response is there yet. It remembers how far it has looked, so a response
/// that arrives in many reads is scanned once. What it accepts: a status line `HTTP/1.x NNN`,
/// header fields, and a body delimited by `Content-Length`, by `Transfer-Encoding: chunked`, or
/// by the end of the connection; interim `1xx` responses are skipped; `HEAD`-like bodiless
/// statuses (`204`, `304`) have no body. Limits: `maxHead` bytes of status line and headers,
/// `maxBody` bytes of body. Anything else is a protocol error, and the connection is not reused.
struct HTTPResponseParser {
    struct Response: Equatable {
        var status: Int
        var body: [UInt8]
        /// False when the server said `Connection: close` (or HTTP/1.0 without keep-alive), or
        /// the body ran to the end of the connection.
        var keepAlive: Bool
        /// Bytes of the buffer this response (interim responses included) took.
        var consumed: Int
    }

    enum Failure: Error, Equatable {
        case malformed(String)
        case headTooLarge
        case bodyTooLarge
    }

    enum Outcome: Equatable {
        case needMore
        case complete(Response)
        case failed(Failure)
    }

    private enum Framing: Equatable {
        case length(Int)
        case chunked
        case untilClose
    }

    let maxHead: Int
    let maxBody: Int

    /// Where the current (possibly interim) response starts in the buffer.
    private var base = 0
    /// Where to resume looking for the end of the head.
    private var scanned = 0
    private var status = 0
    private var keepAlive = true
    private var framing: Framing?
    /// First byte of the body, once the head is parsed.
    private var bodyStart = 0
    /// Chunked bodies: the next chunk-size line, and the body so far.
    private var chunkCursor = 0
    private var chunkedBody: [UInt8] = []
    private var chunkedDone = false

    init(maxHead: Int = 64 << 10, maxBody: Int) {
        self.maxHead = maxHead
        self.maxBody = maxBody
    }

    /// Starts over for the next response on the connection.
    mutating func reset() {
        self = HTTPResponseParser(maxHead: maxHead, maxBody: maxBody)
    }

    /// Looks at `buffer` (every byte received for this response so far); `closed` says the peer
    /// has closed its side, so no more bytes will come.
    mutating func parse(_ buffer: UnsafeBufferPointer<UInt8>, closed: Bool) -> Outcome {
        while true {
            if framing == nil {
                switch parseHead(buffer) {
                case .needMore:
                    return closed ? .failed(.malformed(buffer.count > base ? "connection closed inside the response head" : "connection closed"))
                        : .needMore
                case .failed(let failure): return .failed(failure)
                case .complete: break
                }
                if (100..<200).contains(status) {
                    // An interim response: the real one follows it.
                    let next = bodyStart
                    let limits = (maxHead, maxBody)
                    self = HTTPResponseParser(maxHead: limits.0, maxBody: limits.1)
                    base = next
                    scanned = next
                    continue
                }
            }
            return parseBody(buffer, closed: closed)
        }
    }

    private enum HeadOutcome { case needMore, complete, failed(Failure) }

    private mutating func parseHead(_ buffer: UnsafeBufferPointer<UInt8>) -> HeadOutcome {
        // Find CRLF CRLF from where the last look stopped (three bytes back, in case it was split).
        var i = max(base, scanned - 3)
        var end = -1
        while i + 3 < buffer.count {
            if buffer[i] == 13, buffer[i + 1] == 10, buffer[i + 2] == 13, buffer[i + 3] == 10 {
                end = i
                break
            }
            i += 1
        }
        if end < 0 {
            scanned = buffer.count
            return buffer.count - base > maxHead ? .failed(.headTooLarge) : .needMore
        }
        if end - base > maxHead { return .failed(.headTooLarge) }
        var lines = HeadLines(buffer: buffer, start: base, end: end)
        guard let statusLine = lines.next() else { return .failed(.malformed("empty status line")) }
        // "HTTP/1.1 200 OK"
        guard statusLine.count >= 12, Self.hasPrefix(buffer, statusLine, "HTTP/1."), buffer[statusLine.lowerBound + 8] == 32 else {
            return .failed(.malformed("not an HTTP/1.x status line"))
        }
        let minor = buffer[statusLine.lowerBound + 7]
        guard minor == UInt8(ascii: "0") || minor == UInt8(ascii: "1") else { return .failed(.malformed("unsupported HTTP version")) }
        var code = 0
        for offset in 9..<12 {
            let digit = buffer[statusLine.lowerBound + offset]
            guard digit >= 0x30, digit <= 0x39 else { return .failed(.malformed("bad status code")) }
            code = code * 10 + Int(digit - 0x30)
        }
        guard code >= 100, statusLine.count == 12 || buffer[statusLine.lowerBound + 12] == 32 else {
            return .failed(.malformed("bad status code"))
        }
        status = code
        keepAlive = minor == UInt8(ascii: "1")
        var contentLength: Int?
        var chunked = false
        while let line = lines.next() {
            guard let colon = line.firstIndex(where: { buffer[$0] == UInt8(ascii: ":") }), colon > line.lowerBound else {
                return .failed(.malformed("bad header line"))
            }
            let name = line.lowerBound..<colon
            var valueStart = colon + 1
            var valueEnd = line.upperBound
            while valueStart < valueEnd, buffer[valueStart] == 32 || buffer[valueStart] == 9 { valueStart += 1 }
            while valueEnd > valueStart, buffer[valueEnd - 1] == 32 || buffer[valueEnd - 1] == 9 { valueEnd -= 1 }
            let value = valueStart..<valueEnd
            if Self.equalsIgnoringCase(buffer, name, "content-length") {
                var length = 0
                guard !value.isEmpty, value.count <= 18 else { return .failed(.malformed("bad Content-Length")) }
                for index in value {
                    let digit = buffer[index]
                    guard digit >= 0x30, digit <= 0x39 else { return .failed(.malformed("bad Content-Length")) }
                    length = length * 10 + Int(digit - 0x30)
                }
                if let contentLength, contentLength != length { return .failed(.malformed("conflicting Content-Length")) }
                contentLength = length
            } else if Self.equalsIgnoringCase(buffer, name, "transfer-encoding") {
                // Only chunked is expected from a gateway (no gzip: we send no Accept-Encoding).
                guard Self.endsWithIgnoringCase(buffer, value, "chunked") else { return .failed(.malformed("unsupported Transfer-Encoding")) }
                chunked = true
            } else if Self.equalsIgnoringCase(buffer, name, "connection") {
                if Self.containsTokenIgnoringCase(buffer, value, "close") { keepAlive = false }
                if Self.containsTokenIgnoringCase(buffer, value, "keep-alive") && minor == UInt8(ascii: "0") { keepAlive = true }
            }
        }
        bodyStart = end + 4
        if status == 204 || status == 304 || (100..<200).contains(status) {
            framing = .length(0)
        } else if chunked {
            framing = .chunked
            chunkCursor = bodyStart
        } else if let contentLength {
            if contentLength > maxBody { return .failed(.bodyTooLarge) }
            framing = .length(contentLength)
        } else {
            framing = .untilClose
            keepAlive = false
        }
        return .complete
    }

    private mutating func parseBody(_ buffer: UnsafeBufferPointer<UInt8>, closed: Bool) -> Outcome {
        switch framing! {
        case .length(let length):
            if buffer.count - bodyStart < length {
                return closed ? .failed(.malformed("connection closed inside the body")) : .needMore
            }
            let body = Array(UnsafeBufferPointer(rebasing: buffer[bodyStart..<(bodyStart + length)]))
            return .complete(Response(status: status, body: body, keepAlive: keepAlive, consumed: bodyStart + length))
        case .untilClose:
            if buffer.count - bodyStart > maxBody { return .failed(.bodyTooLarge) }
            guard closed else { return .needMore }
            let body = Array(UnsafeBufferPointer(rebasing: buffer[bodyStart...]))
            return .complete(Response(status: status, body: body, keepAlive: false, consumed: buffer.count))
        case .chunked:
            return parseChunks(buffer, closed: closed)
        }
    }

    private mutating func parseChunks(_ buffer: UnsafeBufferPointer<UInt8>, closed: Bool) -> Outcome {
        while true {
            // A line: the chunk size in hex (extensions after ';' ignored), or, after the last
            // chunk, a trailer field or the empty line that ends the message.
            guard let lineEnd = Self.findCRLF(buffer, from: chunkCursor) else {
                if buffer.count - chunkCursor > 4096 { return .failed(.malformed("chunk line too long")) }
                return closed ? .failed(.malformed("connection closed inside a chunked body")) : .needMore
            }
            if chunkedDone {
                // After the last chunk: trailer fields (skipped), then the empty line that ends it.
                let lineStart = chunkCursor
                chunkCursor = lineEnd + 2
                if lineEnd == lineStart {
                    return .complete(Response(status: status, body: chunkedBody, keepAlive: keepAlive, consumed: chunkCursor))
                }
                continue
            }
            var size = 0
            var index = chunkCursor
            var digits = 0
            while index < lineEnd, let value = Self.hexValue(buffer[index]) {
                size = size * 16 + value
                digits += 1
                index += 1
                if digits > 8 { return .failed(.malformed("chunk size too large")) }
            }
            guard digits > 0 else { return .failed(.malformed("bad chunk size")) }
            if size == 0 {
                chunkedDone = true
                chunkCursor = lineEnd + 2
                continue
            }
            if chunkedBody.count + size > maxBody { return .failed(.bodyTooLarge) }
            let dataStart = lineEnd + 2
            guard buffer.count >= dataStart + size + 2 else {
                return closed ? .failed(.malformed("connection closed inside a chunk")) : .needMore
            }
            guard buffer[dataStart + size] == 13, buffer[dataStart + size + 1] == 10 else { return .failed(.malformed("chunk not followed by CRLF")) }
            chunkedBody.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[dataStart..<(dataStart + size)]))
            chunkCursor = dataStart + size + 2
        }
    }

    private static func findCRLF(_ buffer: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var i = start
        while i + 1 < buffer.count {
            if buffer[i] == 13, buffer[i + 1] == 10 { return i }
            i += 1
        }
        return nil
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: Int(byte - 0x30)
        case 0x41...0x46: Int(byte - 0x41 + 10)
        case 0x61...0x66: Int(byte - 0x61 + 10)
        default: nil
        }
    }

    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte + 32 : byte }

    private static func hasPrefix(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ prefix: StaticString) -> Bool {
        let count = prefix.utf8CodeUnitCount
        guard range.count >= count else { return false }
        let bytes = prefix.utf8Start
        for offset in 0..<count where buffer[range.lowerBound + offset] != bytes[offset] { return false }
        return true
    }

    static func equalsIgnoringCase(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard range.count == count else { return false }
        let bytes = text.utf8Start
        for offset in 0..<count where lower(buffer[range.lowerBound + offset]) != bytes[offset] { return false }
        return true
    }

    private static func endsWithIgnoringCase(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard range.count >= count else { return false }
        return equalsIgnoringCase(buffer, (range.upperBound - count)..<range.upperBound, text)
    }

    /// Whether a comma-separated header value holds `token` (ASCII case-insensitive).
    private static func containsTokenIgnoringCase(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ token: StaticString) -> Bool {
        var start = range.lowerBound
        while start < range.upperBound {
            var end = start
            while end < range.upperBound, buffer[end] != UInt8(ascii: ",") { end += 1 }
            var a = start
            var b = end
            while a < b, buffer[a] == 32 || buffer[a] == 9 { a += 1 }
            while b > a, buffer[b - 1] == 32 || buffer[b - 1] == 9 { b -= 1 }
            if equalsIgnoringCase(buffer, a..<b, token) { return true }
            start = end + 1
        }
        return false
    }

    /// The CRLF-separated lines of a head, as ranges of the buffer.
    private struct HeadLines {
        let buffer: UnsafeBufferPointer<UInt8>
        var cursor: Int
        let end: Int

        init(buffer: UnsafeBufferPointer<UInt8>, start: Int, end: Int) {
            self.buffer = buffer
            self.cursor = start
            self.end = end
        }

        mutating func next() -> Range<Int>? {
            guard cursor < end else { return nil }
            var i = cursor
            while i < end, !(buffer[i] == 13 && buffer[i + 1] == 10) { i += 1 }
            let line = cursor..<i
            cursor = i + 2
            return line
        }
    }
}
