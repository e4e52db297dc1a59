import Foundation
import GatehouseSupport
import Testing

@Suite("Event stream decoding (the SSE client's parser)")
struct SSEDecoderTests {
    /// The stream of the agreed wire format (issue 21): retry, a snapshot, a change, a comment,
    /// token_expiring, closed.
    static let stream = """
        retry: 3000

        id: 41
        event: snapshot
        data: {"user":{"id":"u1"},"resync":false}

        id: 57
        event: change
        data: {"changes":["settings"],"user":{"id":"u1"},"occurredAt":"2026-11-25T12:00:00.123Z"}

        : keep-alive

        event: token_expiring
        data: {"expiresAt":"2026-11-25T12:15:00Z","expiresIn":60}

        event: closed
        data: {"reason":"token_expired","resumable":true,"message":"m"}


        """

    static let expected: [SSEReceivedItem] = [
        .retry(3000),
        .event(SSEReceivedEvent(id: "41", type: "snapshot", data: #"{"user":{"id":"u1"},"resync":false}"#)),
        .event(SSEReceivedEvent(id: "57", type: "change", data: #"{"changes":["settings"],"user":{"id":"u1"},"occurredAt":"2026-11-25T12:00:00.123Z"}"#)),
        .comment("keep-alive"),
        .event(SSEReceivedEvent(id: nil, type: "token_expiring", data: #"{"expiresAt":"2026-11-25T12:15:00Z","expiresIn":60}"#)),
        .event(SSEReceivedEvent(id: nil, type: "closed", data: #"{"reason":"token_expired","resumable":true,"message":"m"}"#)),
    ]

    /// Feeds `bytes` in pieces cut at `cuts` (offsets), collecting the items.
    static func decode(_ bytes: [UInt8], cuts: [Int]) throws -> (items: [SSEReceivedItem], decoder: SSEStreamDecoder) {
        var decoder = SSEStreamDecoder()
        var items: [SSEReceivedItem] = []
        var start = 0
        for cut in cuts.sorted() + [bytes.count] where cut >= start {
            try decoder.feed(bytes[start..<cut], into: &items)
            start = cut
        }
        return (items, decoder)
    }

    @Test("the wire format of the design, whole and split at every single offset")
    func wireFormatAtEverySplit() throws {
        let bytes = Array(Self.stream.utf8)
        let whole = try Self.decode(bytes, cuts: [])
        #expect(whole.items == Self.expected)
        #expect(whole.decoder.lastEventID == "57")
        #expect(whole.decoder.eventCount == 4 && whole.decoder.commentCount == 1)
        for cut in 0...bytes.count {
            #expect(try Self.decode(bytes, cuts: [cut]).items == Self.expected, "cut at \(cut)")
        }
        // One byte at a time.
        #expect(try Self.decode(bytes, cuts: Array(0...bytes.count)).items == Self.expected)
    }

    @Test("CRLF, CR and LF line ends alike, also with the CR and its LF in different reads")
    func lineEnds() throws {
        for separator in ["\r\n", "\r", "\n"] {
            let text = ["id: 7", "event: change", "data: a", "data: b", "", ": c", ""].joined(separator: separator)
            let bytes = Array(text.utf8)
            for cut in 0...bytes.count {
                let items = try Self.decode(bytes, cuts: [cut]).items
                #expect(items == [.event(SSEReceivedEvent(id: "7", type: "change", data: "a\nb")), .comment("c")], "\(separator.debugDescription) cut \(cut)")
            }
        }
    }

    @Test("field rules: no space after the colon, a field without a colon, empty data, unknown fields, ids with NUL, bad retry, BOM")
    func fieldRules() throws {
        let text = "\u{FEFF}data:x\nevent:e\n\ndata\n\ndata:\ndata:\n\nfoo: bar\nevent: only\n\nid: 9\n\nid: a\u{0}b\ndata: y\n\nretry: 12x\nretry:\nretry: 500\n:\n:no space\n"
        let (items, decoder) = try Self.decode(Array(text.utf8), cuts: [])
        #expect(items == [
            .event(SSEReceivedEvent(id: nil, type: "e", data: "x")),
            .event(SSEReceivedEvent(id: nil, type: "message", data: "")),
            .event(SSEReceivedEvent(id: nil, type: "message", data: "\n")),
            // A block with only `id: 9` dispatches nothing but moves the last event id.
            .event(SSEReceivedEvent(id: nil, type: "message", data: "y")),
            .retry(500),
            .comment(""),
            .comment("no space"),
        ])
        #expect(decoder.lastEventID == "9")
    }

    @Test("an event cut off by the end of input is not dispatched; an endless line is refused")
    func partialAndEndless() throws {
        let (items, _) = try Self.decode(Array("id: 1\ndata: half".utf8), cuts: [])
        #expect(items.isEmpty)
        var small = SSEStreamDecoder(maxLineBytes: 16)
        #expect(throws: SSEDecodingError.self) { _ = try small.feed(Array(repeating: UInt8(ascii: "a"), count: 17)) }
    }

    // MARK: The HTTP response around it

    static func chunked(_ body: String, sizes: [Int]) -> String {
        var out = ""
        var rest = Substring(body)
        var index = 0
        while !rest.isEmpty {
            let size = min(sizes[index % sizes.count], rest.utf8.count)
            let piece = String(rest.utf8.prefix(size))!
            out += String(size, radix: 16) + (index % 2 == 0 ? "" : ";ext=1") + "\r\n" + piece + "\r\n"
            rest = rest.dropFirst(piece.count)
            index += 1
        }
        return out + "0\r\n\r\n"
    }

    static func decodeResponse(_ bytes: [UInt8], cuts: [Int]) throws -> (items: [SSEReceivedItem], decoder: SSEResponseDecoder) {
        var decoder = SSEResponseDecoder()
        var items: [SSEReceivedItem] = []
        var start = 0
        for cut in cuts.sorted() + [bytes.count] where cut >= start {
            try decoder.feed(Array(bytes[start..<cut]), into: &items)
            start = cut
        }
        return (items, decoder)
    }

    @Test("a chunked 200 text/event-stream: head, chunks of odd sizes with extensions, the last chunk; split at every offset")
    func chunkedStream() throws {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nTransfer-Encoding: chunked\r\n\r\n"
        let bytes = Array((head + Self.chunked(Self.stream, sizes: [1, 7, 30, 2])).utf8)
        for cut in 0...bytes.count {
            let (items, decoder) = try Self.decodeResponse(bytes, cuts: [cut, cut / 2])
            #expect(items == Self.expected, "cut at \(cut)")
            #expect(decoder.isComplete && decoder.head?.isEventStream == true)
            #expect(decoder.head?.headers["cache-control"] == "no-store")
        }
        // Without the last chunk the stream is open (not complete).
        let open = Array((head + "5\r\n: a\n\n\r\n").utf8)
        let (items, decoder) = try Self.decodeResponse(open, cuts: [])
        #expect(items == [.comment("a")] && !decoder.isComplete)
    }

    @Test("a problem+json answer is kept as the body, whole at its Content-Length, split at every offset")
    func problemAnswer() throws {
        let body = #"{"type":"https://gatehouse.dev/errors/invalid_last_event_id","status":400,"code":"invalid_last_event_id","detail":"d"}"#
        let text = "HTTP/1.1 400 Bad Request\r\nContent-Type: application/problem+json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
        let bytes = Array(text.utf8)
        for cut in 0...bytes.count {
            let (items, decoder) = try Self.decodeResponse(bytes, cuts: [cut])
            #expect(items.isEmpty)
            #expect(decoder.head?.status == 400 && decoder.head?.isEventStream == false)
            #expect(decoder.isComplete == true && String(decoding: decoder.body, as: UTF8.self) == body, "cut at \(cut)")
        }
        // A 503 with Retry-After, chunked.
        let busy = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nTransfer-Encoding: chunked\r\n\r\n" + Self.chunked("{}", sizes: [1])
        let (_, decoder) = try Self.decodeResponse(Array(busy.utf8), cuts: [])
        #expect(decoder.head?.headers["retry-after"] == "1" && decoder.body == Array("{}".utf8) && decoder.isComplete)
    }

    @Test("a body framed by the close ends at finish(); malformed heads and chunk sizes are refused")
    func closeFramingAndMalformed() throws {
        var decoder = SSEResponseDecoder()
        let items = try decoder.feed(Array("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n".utf8))
        #expect(items == [.event(SSEReceivedEvent(id: nil, type: "message", data: "x"))])
        #expect(!decoder.isComplete)
        decoder.finish()
        #expect(decoder.isComplete)
        for bad in ["SMTP 220 hello\r\n\r\n", "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n"] {
            var decoder = SSEResponseDecoder()
            #expect(throws: SSEDecodingError.self, "\(bad.debugDescription)") { _ = try decoder.feed(Array(bad.utf8)) }
        }
    }
}
