import GatehouseContracts
import Logging
import ProtoCodec
import ZeroMQ
import RPCRouting

/// The I/O thread of an `RPCServer`: the only code that touches its ROUTER socket.
final class ServerLoop {
    private let core: RPCServer.Core
    private let socket: Socket
    private let poller = Poller()
    private var commands: [RPCServer.Command] = []
    private let zapDomain: String?

    init(core: RPCServer.Core, socket: Socket, zapDomain: String?) {
        self.core = core
        self.socket = socket
        self.zapDomain = zapDomain
    }

    func run() {
        let socketIndex = poller.add(socket, events: .readable)
        let signalIndex = poller.add(fileDescriptor: core.io.signal.fileDescriptor, events: .readable)
        var accepting = true
        var drainDeadline: ContinuousClock.Instant?
        while true {
            // Sleep only when nothing is queued: jobs and replies the loop queued to itself (a
            // handler that ran here) are handled in the same wake-up, without a signal.
            if core.io.prepareToSleep() {
                do {
                    _ = try poller.poll(timeoutMilliseconds: pollTimeout(until: drainDeadline))
                } catch {
                    core.logger.error("rpc server poll failed: \(error)")
                    break
                }
                core.io.wokeUp(signalled: poller.readyEvents(at: signalIndex).contains(.readable))
            }
            // Read every ready request first (each starts its handler task), then run the
            // handlers and send the replies they produce, so a burst is answered as a batch.
            if accepting { receiveRequests() }
            if runCommands(accepting: accepting) {
                accepting = false
                drainDeadline = .now + core.configuration.drainTimeout
                poller.setEvents([], at: socketIndex)
                core.logger.debug("rpc server draining \(core.inFlight.load(ordering: .relaxed)) requests")
            }
            if !accepting {
                if core.inFlight.load(ordering: .acquiring) == 0 { break }
                if let deadline = drainDeadline, deadline <= .now {
                    core.logger.warning("rpc server stopped with \(core.inFlight.load(ordering: .relaxed)) requests unfinished")
                    break
                }
            }
        }
        // Replies queued by the last handlers. libzmq sends them within the 1 s linger; a client
        // reads them even when the connection closes right behind them (`ClientSocket`).
        _ = runCommands(accepting: false)
        socket.close()
        socket.releaseZAPDomain(zapDomain)
    }

    /// Runs queued jobs and sends queued replies, a few rounds while running them queues more
    /// (a handler's reply is queued by the job that ran it). Returns whether a stop was asked
    /// for while `accepting`.
    private func runCommands(accepting: Bool) -> Bool {
        var stopAsked = false
        for _ in 0..<4 {
            core.io.take(into: &commands)
            if commands.isEmpty { break }
            for command in commands {
                switch command {
                case let .reply(identity, header, body):
                    send(identity: identity, header: header, body: body)
                case .job(let job):
                    job.runSynchronously(on: core.executor.asUnownedTaskExecutor())
                case .stop:
                    if accepting { stopAsked = true }
                }
            }
        }
        commands.removeAll(keepingCapacity: true)
        return stopAsked
    }

    /// Sends one reply (identity, header, body) without waiting; a full peer queue drops it.
    private func send(identity: [UInt8], header: [UInt8], body: [UInt8]) {
        do {
            guard try socket.send(identity, more: true, dontWait: true) else {
                core.logger.warning("rpc server dropped a reply: the peer's queue is full")
                return
            }
            // Once the first frame is queued, libzmq takes the rest of the message.
            try socket.send(header, more: true, dontWait: true)
            try socket.send(body, more: false, dontWait: true)
        } catch {
            core.logger.warning("rpc server could not send a reply: \(error)")
        }
    }

    private func reply(identity: [UInt8], requestID: UInt64, error: RPCError) {
        let header = (try? ProtobufEncoder().encode(ReplyHeader(requestID: requestID, error: error))) ?? []
        send(identity: identity, header: header, body: [])
    }

    /// The header frame of a request: decoded in place when it has the common shape, else
    /// copied for the full decoder.
    private enum HeaderFrame {
        case decoded(RequestHeader)
        case raw([UInt8])
    }

    private func receiveRequests() {
        // Bounded so replies and shutdown are not starved by a flood of requests.
        for _ in 0..<1024 {
            do {
                // Frames: identity, header, body. Read one by one (no array of frames); the
                // header is parsed where libzmq holds it.
                guard let (identity, firstMore) = try socket.receive(dontWait: true) else { return }
                var frameCount = 1
                var more = firstMore
                var header: HeaderFrame?
                var body: [UInt8] = []
                while more {
                    // The rest of a message is already here: libzmq delivers messages whole.
                    let next: Bool?
                    switch frameCount {
                    case 1:
                        next = try socket.receive(dontWait: false) { bytes, more in
                            header = RequestHeader.fastDecode(bytes).map { .decoded($0) } ?? .raw(Array(bytes))
                            return more
                        }
                    case 2:
                        next = try socket.receive(dontWait: false) { bytes, more in
                            body = Array(bytes)
                            return more
                        }
                    default:
                        next = try socket.receive(dontWait: false) { _, more in more }
                    }
                    guard let next else { break }
                    frameCount += 1
                    more = next
                }
                dispatch(identity: identity, header: header, body: body, frameCount: frameCount)
            } catch {
                core.logger.error("rpc server receive failed: \(error)")
                return
            }
        }
    }

    private func dispatch(identity: [UInt8], header headerFrame: HeaderFrame?, body: [UInt8], frameCount: Int) {
        let received = ContinuousClock.now
        func peekRequestID() -> UInt64? {
            switch headerFrame {
            case .decoded(let header): header.requestID
            case .raw(let bytes): RequestHeader.peekRequestID(bytes)
            case nil: nil
            }
        }
        guard frameCount == 3, let headerFrame else {
            if frameCount >= 2, let id = peekRequestID() {
                reply(identity: identity, requestID: id, error: RPCError(.malformedRequest, "a request has two frames: header and body"))
            } else {
                core.logger.warning("rpc server dropped a message of \(frameCount) frames that is not a request")
            }
            return
        }
        let header: RequestHeader
        switch headerFrame {
        case .decoded(let decoded):
            header = decoded
        case .raw(let bytes):
            do {
                header = try RequestHeader.decode(bytes)
            } catch {
                if let id = RequestHeader.peekRequestID(bytes) {
                    reply(identity: identity, requestID: id, error: RPCError(.malformedRequest, "the request header does not decode"))
                } else {
                    core.logger.warning("rpc server dropped a request whose header does not decode: \(error)")
                }
                return
            }
        }
        guard header.version == rpcProtocolVersion else {
            reply(identity: identity, requestID: header.requestID, error: RPCError(
                .unsupportedVersion, "protocol version \(header.version) is not supported; this server speaks \(rpcProtocolVersion)",
                details: ["supported": "\(rpcProtocolVersion)"]))
            return
        }
        let timeout = header.timeoutMs == 0 ? core.configuration.defaultTimeout : .milliseconds(header.timeoutMs)
        let deadline = received + timeout
        if core.configuration.handlerExecutor == .ioThread, let handler = core.router.syncHandler(for: header.method) {
            // Answered here and now: no task, no job, the reply goes out in this wake-up.
            let context = RPCContext(
                requestID: header.requestID, method: header.method, deadline: deadline,
                traceParent: header.traceParent, logger: core.logger)
            var replyHeader = ReplyHeader(requestID: header.requestID, error: nil)
            var replyBody: [UInt8] = []
            do {
                replyBody = try handler(body, context)
            } catch {
                replyHeader.error = RPCRouter.wireError(error, method: header.method, logger: context.logger)
            }
            guard let headerBytes = try? replyHeader.encoded() else { return }
            send(identity: identity, header: headerBytes, body: replyBody)
            return
        }
        guard let handler = core.router.handler(for: header.method) else {
            reply(identity: identity, requestID: header.requestID, error: RPCError(.unimplemented, "no method named \(header.method)"))
            return
        }
        let limit = core.configuration.maxInFlight
        guard core.inFlight.load(ordering: .relaxed) < limit else {
            reply(identity: identity, requestID: header.requestID, error: RPCError(.overloaded, "the service is at capacity; retry later"))
            return
        }
        core.inFlight.add(1, ordering: .relaxed)
        let context = RPCContext(
            requestID: header.requestID, method: header.method, deadline: deadline,
            traceParent: header.traceParent, logger: core.logger)
        let core = self.core
        let executor: (any TaskExecutor)? = core.configuration.handlerExecutor == .ioThread ? core.executor : nil
        Task(executorPreference: executor) {
            defer { core.finished() }
            var replyHeader = ReplyHeader(requestID: context.requestID, error: nil)
            var replyBody: [UInt8] = []
            if ContinuousClock.now < deadline {
                do {
                    replyBody = try await handler(body, context)
                } catch {
                    replyHeader.error = RPCRouter.wireError(error, method: context.method, logger: context.logger)
                }
            } else {
                // Waited past its deadline (behind other work): refused without running, and
                // said so, so the caller does not wait for a reply that will not come.
                replyHeader.error = RPCError.deadlinePassed(context.method)
            }
            guard let headerBytes = try? replyHeader.encoded() else { return }
            core.io.submit(.reply(identity: identity, header: headerBytes, body: replyBody))
        }
    }
}
