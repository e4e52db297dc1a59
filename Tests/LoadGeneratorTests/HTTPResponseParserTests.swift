import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
@testable import LoadGenerator

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
