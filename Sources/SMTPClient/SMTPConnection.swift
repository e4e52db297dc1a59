import NIOCore
import NIOPosix
import NIOSSL

/// One TCP connection to the relay: commands out, replies in, each reply awaited with a deadline.
/// Used by one task at a time (one conversation); `abort(_:)` may be called from anywhere.
struct SMTPConnection: Sendable {
    let channel: any Channel
    let replies: SMTPReplyHandler
    let commandTimeout: Duration

    /// Connects to `host:port` within `connectTimeout`, TLS from the first byte when `implicitTLS` is given.
    static func connect(
        host: String, port: Int, serverName: String?, implicitTLS: NIOSSLContext?, connectTimeout: Duration,
        commandTimeout: Duration, group: any EventLoopGroup
    ) async throws -> SMTPConnection {
        let eventLoop = group.next()
        let replies = SMTPReplyHandler(eventLoop: eventLoop)
        let channel = try await ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(connectTimeout))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let implicitTLS {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: implicitTLS, serverHostname: serverName))
                    }
                    try channel.pipeline.syncOperations.addHandler(replies)
                }
            }
            .connect(host: host, port: port).get()
        return SMTPConnection(channel: channel, replies: replies, commandTimeout: commandTimeout)
    }

    /// Sends `line` (CRLF added) when given, then waits for the next reply and throws
    /// `SMTPFailure.rejected` unless its code is in `expected`.
    /// `timeout` replaces `commandTimeout` for this reply (a shorter wait for `QUIT`).
    @discardableResult
    func command(_ line: String?, expect expected: ClosedRange<Int> = 250...259, timeout: Duration? = nil) async throws -> SMTPReply {
        if let line { send(Array((line + "\r\n").utf8)) }
        let reply = try await nextReply(timeout: timeout ?? commandTimeout)
        guard expected.contains(reply.code) else { throw SMTPFailure.rejected(reply) }
        return reply
    }

    /// Writes `bytes` without waiting for them to leave (a failed write closes the channel, which
    /// fails the reply being awaited).
    func send(_ bytes: [UInt8]) {
        channel.writeAndFlush(channel.allocator.buffer(bytes: bytes), promise: nil)
    }

    /// The next reply, or `SMTPFailure.timeout` (and the connection closed) after `timeout`.
    func nextReply(timeout: Duration) async throws -> SMTPReply {
        let future = replies.nextReply()
        let replies = self.replies, channel = self.channel
        let timer = channel.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
            replies.fail(SMTPFailure.timeout)
            channel.close(promise: nil)
        }
        // On the event loop, as the reply arrives: a reply that came in time never meets the timer.
        future.whenComplete { _ in timer.cancel() }
        return try await future.get()
    }

    /// Puts TLS under the conversation (after `220` to `STARTTLS`); the handshake runs before the next
    /// command's bytes leave. Refuses when the relay already sent more (bytes injected in plain text).
    func startTLS(context: NIOSSLContext, serverName: String?) async throws {
        let replies = self.replies, channel = self.channel
        try await channel.eventLoop.submit {
            guard !replies.hasUnreadInput else {
                throw SMTPFailure.protocolViolation("data after the reply to STARTTLS, before the TLS handshake")
            }
            let handler = try NIOSSLClientHandler(context: context, serverHostname: serverName)
            try channel.pipeline.syncOperations.addHandler(handler, position: .first)
        }.get()
    }

    /// Ends the conversation from outside it (the delivery's task was cancelled): the reply being
    /// awaited, and every later one, fails with `error`, and the connection is closed at once.
    func abort(_ error: any Error) {
        replies.fail(error)
        channel.close(promise: nil)
    }

    /// Closes the connection (nothing to wait for if it is already closed).
    func close() async {
        try? await channel.close().get()
    }
}

/// Splits the relay's bytes into replies and hands each to the command waiting for it.
/// `@unchecked Sendable`: every piece of its state is read and written on `eventLoop` only.
final class SMTPReplyHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    /// The longest line accepted (RFC 5321 allows 512 bytes; relays' texts are longer in practice).
    static let maximumLineLength = 4096

    private let eventLoop: any EventLoop
    private var buffer = ByteBuffer()
    private var parser = SMTPReplyParser()
    private var ready: [SMTPReply] = []
    private var waiter: EventLoopPromise<SMTPReply>?
    private var failure: (any Error)?

    init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    /// The next complete reply (one caller waits at a time).
    func nextReply() -> EventLoopFuture<SMTPReply> {
        eventLoop.flatSubmit {
            let promise = self.eventLoop.makePromise(of: SMTPReply.self)
            self.waiter = promise
            self.handOver()
            return promise.futureResult
        }
    }

    /// Ends the conversation with `error`: the reply being awaited, and every later one, fails with it.
    func fail(_ error: any Error) {
        // At once when on the event loop (the timer), so it is the failure even if closing follows.
        eventLoop.execute(now: true) {
            if self.failure == nil { self.failure = error }
            self.handOver()
        }
    }

    /// Whether the relay sent anything not yet asked for (on the event loop only).
    var hasUnreadInput: Bool {
        eventLoop.preconditionInEventLoop()
        return !ready.isEmpty || buffer.readableBytes > 0
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        buffer.writeBuffer(&bytes)
        do {
            while let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) {
                let length = newline - buffer.readableBytesView.startIndex
                var line = buffer.readString(length: length) ?? ""
                buffer.moveReaderIndex(forwardBy: 1)
                if line.hasSuffix("\r") { line.removeLast() }
                if let reply = try parser.feed(line) { ready.append(reply) }
            }
            if buffer.readableBytes > Self.maximumLineLength {
                throw SMTPFailure.protocolViolation("a reply line longer than \(Self.maximumLineLength) bytes")
            }
            buffer.discardReadBytes()
        } catch {
            if failure == nil { failure = error }
            context.close(promise: nil)
        }
        handOver()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if failure == nil { failure = SMTPFailure.closed }
        handOver()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = error }
        handOver()
        context.close(promise: nil)
    }

    /// Completes the waiting caller's promise with the next reply, or with the failure once
    /// every reply that arrived before it was taken.
    private func handOver() {
        guard let waiter else { return }
        if !ready.isEmpty {
            self.waiter = nil
            waiter.succeed(ready.removeFirst())
        } else if let failure {
            self.waiter = nil
            waiter.fail(failure)
        }
    }
}

extension EventLoop {
    /// Runs `body` at once when called on this loop (`now`), else as a task on it.
    fileprivate func execute(now: Bool, _ body: @escaping @Sendable () -> Void) {
        if now, inEventLoop { body() } else { execute(body) }
    }
}
