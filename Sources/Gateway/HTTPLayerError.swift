import GatehouseContracts
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// A request the HTTP layer itself gave up on: bad framing, a timeout. The connection handler
/// answers `problem` when a response can still be written, then closes the connection. When the
/// failure happens while a body is being read, the route reading it sees this error (so a partial
/// body is never taken for a whole one) and renders the same problem.
struct HTTPLayerError: Error, Sendable {
    let problem: GatewayError

    static let headTimeout = HTTPLayerError(problem: GatewayError(.requestTimeout, detail: "The request head did not arrive in time."))
    static let bodyTimeout = HTTPLayerError(problem: GatewayError(.requestTimeout, detail: "The request body did not arrive in time."))

    static let uriTooLong = HTTPLayerError(
        problem: GatewayError(.uriTooLong, detail: "The request line is longer than \(RequestLineWatch.maxLength) bytes; shorten the request target."))

    static func malformed(_ detail: String) -> HTTPLayerError { HTTPLayerError(problem: GatewayError(.malformedHTTP, detail: detail)) }

    /// The problem for an error of the HTTP parser, of the HTTP/1 → HTTP types conversion or of
    /// the request-line watch; nil for any other error (an I/O error, say), which is not the
    /// client's framing.
    /// - Parameters:
    ///   - readingBody: whether a request body was being read when it happened.
    ///   - line: what `RequestLineWatch` saw of the current request line (nil: nothing known).
    static func framing(_ error: any Error, readingBody: Bool, line: RequestLineWatch? = nil) -> HTTPLayerError? {
        switch error {
        case is RequestLineTooLong:
            return .uriTooLong
        case HTTPParserError.headerOverflow where line.map({ !$0.lineEnded }) ?? false:
            return .uriTooLong
        case HTTPParserError.invalidVersion where line.map({ $0.lineEnded && $0.bareLineFeed }) ?? false:
            return .malformed("The request line ends with a bare LF; lines of a request head end with CRLF.")
        case let parser as HTTPParserError:
            return parserFraming(parser, readingBody: readingBody)
        case is HTTP1TypeConversionError:
            return .malformed("The request method or target is not valid.")
        case is ByteToMessageDecoderError:
            return .malformed("The request is not valid HTTP/1.1.")
        default:
            return nil
        }
    }

    private static func parserFraming(_ error: HTTPParserError, readingBody: Bool) -> HTTPLayerError {
        switch error {
        case .headerOverflow:
            return HTTPLayerError(
                problem: GatewayError(.headerFieldsTooLarge, detail: "The request line or header fields are too large."))
        case .invalidVersion:
            return HTTPLayerError(problem: GatewayError(.httpVersionNotSupported, detail: "The HTTP version is missing, malformed or not 1.x; only HTTP/1.0 and HTTP/1.1 are served."))
        case .invalidEOFState, .closedConnection:
            if readingBody {
                return HTTPLayerError(
                    problem: GatewayError(.incompleteBody, detail: "The connection ended before the whole request body arrived."))
            }
            return .malformed("The connection ended in the middle of the request head.")
        case .invalidChunkSize:
            return .malformed("A chunk size of the chunked body is not valid.")
        case .unexpectedContentLength:
            return .malformed("Content-Length conflicts with Transfer-Encoding or with another Content-Length.")
        case .invalidContentLength:
            return .malformed("Content-Length is not valid.")
        case .invalidHeaderToken, .invalidCharactersUsed, .lfExpected:
            return .malformed("A header field is not valid.")
        case .invalidMethod:
            return .malformed("The request method is not valid.")
        case .invalidURL:
            return .malformed("The request target is not valid.")
        default:
            return .malformed(
                readingBody ? "The request body is not valid HTTP/1.1 framing." : "The request is not valid HTTP/1.1.")
        }
    }
}

extension GatewayError {
    /// The problem as response parts, with `Connection: close` (the connection is closed after it).
    var closingResponse: (head: HTTPResponse, body: ByteBuffer) {
        let body = ByteBuffer(bytes: self.body)
        var fields = headers
        fields[.contentType] = "application/problem+json"
        fields[.cacheControl] = "no-store"
        fields[.connection] = "close"
        fields[.contentLength] = String(body.readableBytes)
        return (HTTPResponse(status: status, headerFields: fields), body)
    }

    /// The problem as the bytes of a whole HTTP/1.1 response, for a connection without an HTTP codec.
    var closingResponseBytes: ByteBuffer {
        let (head, body) = closingResponse
        var text = "HTTP/1.1 \(head.status.code) \(head.status.reasonPhrase)\r\n"
        for field in head.headerFields { text += "\(field.name.rawName): \(field.value)\r\n" }
        text += "\r\n"
        var buffer = ByteBuffer(string: text)
        buffer.writeImmutableBuffer(body)
        return buffer
    }
}
