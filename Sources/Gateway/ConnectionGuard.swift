import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes

/// The time a connection may take over each phase of a request (see `ConnectionGuard`).
struct ConnectionTimeouts: Sendable {
    /// From accepting the connection, or from the first byte of a later request, to its whole head.
    var head: TimeAmount
    /// From the request head to the end of its body.
    var body: TimeAmount
    /// From the end of a response to the first byte of the next request.
    var idle: TimeAmount
    /// How long a connection being closed after an error answer is still read (and its bytes
    /// dropped) so the answer is not lost to a reset, before it is closed anyway.
    var linger: TimeAmount = .seconds(1)
}

/// A handler whose work begins once its channel is active: `start(_:)` runs once, whether the
/// handler is added to an active channel or its channel becomes active later.
protocol StartsWhenActive: ChannelInboundHandler {
    /// Whether `start(_:)` has run.
    var started: Bool { get set }
    /// The handler's first work on the active channel.
    func start(_ context: ChannelHandlerContext)
}

extension StartsWhenActive {
    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startOnce(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startOnce(context)
        context.fireChannelActive()
    }

    private func startOnce(_ context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        start(context)
    }
}

/// One per connection, between the HTTP codec and Hummingbird: the connection's timeouts, and
/// the answer to requests the HTTP layer itself refuses.
///
/// - Timeouts: reading a request head (`head`, counted from accept for the first request), its
///   body (`body`, the whole body, so a trickle cannot stretch it) and the wait between requests
///   (`idle`). Past one, a request that can still be answered gets 408 `request_timeout`; an idle
///   connection, or one that never sent a byte, is just closed. While a response is being
///   produced no timer runs (the backend calls carry their own deadline).
/// - Framing: a parser error (bad request line, header, chunk size, conflicting lengths, a body
///   cut short, a head over the size limits, a version other than 1.x) is answered with its
///   problem+json row (`HTTPLayerError`) once the responses ahead of it are written, and the
///   connection is closed. When a body was being read the route reading it gets the error too.
///
/// One timer at a time: state changes only record instants, and the timer is moved only when a
/// deadline comes earlier than the one it is set for, so a keep-alive request schedules nothing.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler, StartsWhenActive {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    enum Phase: String { case head, body, idle, linger }

    private let timeouts: ConnectionTimeouts
    private let metrics: ConnectionMetrics
    private let logger: Logger

    var started = false
    /// No request head has arrived yet on this connection.
    private var fresh = true
    /// Bytes of a request head have arrived (no whole head yet).
    private var partialHead = false
    /// A head has arrived and its end not yet.
    private var readingBody = false
    /// Request heads read whose response has not ended.
    private var unanswered = 0
    private var responseStarted = false
    /// A part was read in the current read burst.
    private var readParts = false
    private var headStart = NIODeadline.now()
    private var bodyStart = NIODeadline.now()
    private var idleStart = NIODeadline.now()

    /// The request stream failed: later parts and errors are dropped.
    private var failed = false
    /// Close once every request read so far is answered (then answer `pendingProblem`, if any).
    private var closeWhenAnswered = false
    private var pendingProblem: GatewayError?
    /// Closing: responses from above are refused; input is drained until `lingerUntil`.
    private var lingerUntil: NIODeadline?
    private var outputClosed = false
    private var inputEnded = false

    private var timer: Scheduled<Void>?
    private var timerDeadline = NIODeadline.distantFuture
    /// The watch in front of the decoder (`GatewayHTTPChannel.setup` installs it): told where each
    /// request ends, asked about the request line when the decoder fails.
    var lineWatch: RequestLineWatch?

    init(timeouts: ConnectionTimeouts, metrics: ConnectionMetrics, logger: Logger) {
        self.timeouts = timeouts
        self.metrics = metrics
        self.logger = logger
    }

    // MARK: Lifecycle

    func start(_ context: ChannelHandlerContext) {
        headStart = .now()
        ensureTimer(context, at: headStart + timeouts.head)
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimer()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if failed { return }
        readParts = true
        switch unwrapInboundIn(data) {
        case .head:
            fresh = false
            partialHead = false
            readingBody = true
            unanswered += 1
            bodyStart = .now()  // the body timer is set at the end of the read, if the body is still due
        case .body:
            break
        case .end:
            readingBody = false
            lineWatch?.requestEnded()
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if readingBody, !failed {
            // A body is still due (a request whose head and body came in one read sets no timer).
            ensureTimer(context, at: bodyStart + timeouts.body)
        } else if !readParts, !failed, !partialHead {
            // Bytes arrived but made no part: the start of a request head.
            partialHead = true
            if !fresh {
                headStart = .now()
                if unanswered == 0 { ensureTimer(context, at: headStart + timeouts.head) }
            }
        }
        readParts = false
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failed { return }
        guard let layerError = HTTPLayerError.framing(error, readingBody: readingBody, line: lineWatch) else {
            context.fireErrorCaught(error)
            return
        }
        fail(context, layerError)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if lingerUntil != nil, event as? ChannelEvent == .inputClosed {
            inputEnded = true
            if outputClosed { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if lingerUntil != nil {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(var head):
            responseStarted = true
            if closeWhenAnswered, unanswered == 1, pendingProblem == nil {  // the last answer before the close
                head.headerFields[.connection] = "close"
                context.write(wrapOutboundOut(.head(head)), promise: promise)
                return
            }
        case .body:
            break
        case .end:
            responseStarted = false
            unanswered -= 1
            context.write(data, promise: promise)
            guard unanswered == 0 else { return }
            if closeWhenAnswered {
                context.flush()
                if let problem = pendingProblem { answer(context, problem) } else { closeAfterLinger(context) }
            } else if !readingBody {
                if partialHead {
                    ensureTimer(context, at: headStart + timeouts.head)
                } else {
                    idleStart = .now()
                    ensureTimer(context, at: idleStart + timeouts.idle)
                }
            }
            return
        }
        context.write(data, promise: promise)
    }

    // MARK: Failing and closing

    /// Gives up on the request stream: the body reader (if any) gets the error; the problem is
    /// answered now when nothing is ahead of it, else once the responses ahead are written.
    private func fail(_ context: ChannelHandlerContext, _ error: HTTPLayerError) {
        failed = true
        metrics.rejected(error.problem.code)
        logger.info(
            "request refused by the HTTP layer",
            metadata: ["status": .stringConvertible(error.problem.status.code), "code": .string(error.problem.code)])
        if readingBody { context.fireErrorCaught(error) }
        let current = readingBody ? 1 : 0
        if !responseStarted, unanswered == current {
            answer(context, error.problem)
        } else if unanswered == 0 {
            closeAfterLinger(context)  // this request was answered before its body ended
        } else {
            closeWhenAnswered = true
            pendingProblem = readingBody ? nil : error.problem  // a route renders its own body error
        }
    }

    private func answer(_ context: ChannelHandlerContext, _ problem: GatewayError) {
        let (head, body) = problem.closingResponse
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        closeAfterLinger(context)
    }

    /// Closes the output once the writes so far are out, then reads and drops input until the
    /// client closes or `timeouts.linger` passes (closing with unread input would reset the
    /// connection and could destroy the answer before the client reads it).
    private func closeAfterLinger(_ context: ChannelHandlerContext) {
        failed = true
        lingerUntil = .now() + timeouts.linger
        ensureTimer(context, at: lingerUntil!)
        let closed = context.eventLoop.makePromise(of: Void.self)
        context.close(mode: .output, promise: closed)
        closed.futureResult.assumeIsolated().whenComplete { [self] result in
            outputClosed = true
            if case .failure = result { context.close(promise: nil) } else if inputEnded { context.close(promise: nil) }
        }
    }

    // MARK: Timer

    /// The phase whose deadline applies now, and that deadline; nil while a response is being made.
    private var currentDeadline: (Phase, NIODeadline)? {
        if let lingerUntil { return (.linger, lingerUntil) }
        if readingBody { return (.body, bodyStart + timeouts.body) }
        if unanswered > 0 { return nil }
        if fresh || partialHead { return (.head, headStart + timeouts.head) }
        return (.idle, idleStart + timeouts.idle)
    }

    /// Makes the timer fire no later than `deadline`.
    private func ensureTimer(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        if timer != nil, timerDeadline <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            timer = nil
            timerFired(context)
        }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
    }

    private func timerFired(_ context: ChannelHandlerContext) {
        guard let (phase, deadline) = currentDeadline else { return }
        if deadline > .now() {
            ensureTimer(context, at: deadline)
            return
        }
        if failed, phase != .linger {
            // Given up already and still waiting for a response ahead: stop waiting.
            context.close(promise: nil)
            return
        }
        switch phase {
        case .linger:
            context.close(promise: nil)
        case .idle:
            metrics.timedOut(.idle)
            logger.debug("idle connection closed")
            context.close(promise: nil)
        case .head:
            metrics.timedOut(.head)
            if partialHead {
                fail(context, .headTimeout)
            } else {
                logger.debug("connection closed: no request arrived in time")
                context.close(promise: nil)
            }
        case .body:
            metrics.timedOut(.body)
            fail(context, .bodyTimeout)
        }
    }
}
