import NIOCore

/// One per connection, in front of the HTTP decoder: the two facts about the request line of the
/// request being read that the decoder's errors leave out, so the answer names the real fault.
///
/// - A request line longer than `maxLength` bytes is refused here, before the decoder buffers
///   it, with 414 `uri_too_long` (`RequestLineTooLong`); the decoder's own limit (80 KiB over the
///   line and the header fields) would answer 431 for the whole head.
/// - A request line ending in a bare LF (no CR): the decoder reports it as a bad HTTP version
///   (505); it is a framing fault, 400 `malformed_http`.
///
/// A request starts at the connection's start and after the end of the previous one
/// (`requestEnded()`, from `ConnectionGuard`). Empty lines before a request line are skipped, as
/// RFC 9112 asks. With pipelined requests the bytes of the next request may have gone through
/// with the previous one's; the watch then starts from the next read, which at worst makes the
/// answer to a malformed pipelined request the decoder's own code.
final class RequestLineWatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The longest request line accepted (method, target and version, without the line end).
    static let maxLength = 8192

    /// The request line of the current request has ended (its LF has arrived).
    private(set) var lineEnded = false
    /// It ended with a bare LF.
    private(set) var bareLineFeed = false
    private var length = 0
    private var previous: UInt8 = 0
    private var tooLong = false
    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refused { return }
        if !lineEnded { scan(unwrapInboundIn(data)) }
        if tooLong {
            refused = true
            context.fireErrorCaught(RequestLineTooLong())
            return
        }
        context.fireChannelRead(data)
    }

    /// The current request has been read to its end: the next bytes start a new one.
    func requestEnded() {
        lineEnded = false
        tooLong = false
        bareLineFeed = false
        length = 0
        previous = 0
    }

    private func scan(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { bytes in
            for byte in bytes {
                if byte == UInt8(ascii: "\n") {
                    // An empty line (or a lone CR) before the request line is skipped.
                    if length == 0 || (length == 1 && previous == UInt8(ascii: "\r")) {
                        length = 0
                        previous = 0
                        continue
                    }
                    lineEnded = true
                    bareLineFeed = previous != UInt8(ascii: "\r")
                    tooLong = length - (bareLineFeed ? 0 : 1) > Self.maxLength
                    return
                }
                length += 1
                previous = byte
                // One byte more than the limit may still be the line's CR.
                if length > Self.maxLength + 1 {
                    tooLong = true
                    return
                }
            }
        }
    }
}

/// A request line over `RequestLineWatch.maxLength` bytes.
struct RequestLineTooLong: Error {}
