import GatehouseContracts
import GatehouseSupport
import Logging
import ProtoCodec
import Synchronization
import ZeroMQ
import RPCRouting

/// The I/O thread of an `RPCServer`: the only code that touches its ROUTER socket.
final class ServerLoop {
    private let core: RPCServer.Core
    private let socket: Socket
    private let poller = Poller()
    private var commands: [RPCServer.Command] = []
    private let zapDomain: String?
    /// Accepted requests whose handlers run as tasks, until they are answered.
    private var pending = PendingRequests()
    /// False once shutdown has begun: new requests are answered `unavailable`.
    private var accepting = true
    /// When each (client key, method) refusal was last logged, and how many since.
    private var refusalsLogged: [String: (at: ContinuousClock.Instant, since: Int)] = [:]

    /// A loop serving `socket` (moved to the I/O thread with the loop) for `core`.
    init(core: RPCServer.Core, socket: Socket, zapDomain: String?) {
        self.core = core
        self.socket = socket
        self.zapDomain = zapDomain
    }

    /// Serves until stopped and drained (or the drain times out), then answers what is left and closes.
    func run() {
        poller.add(socket, events: .readable)
        let signalIndex = poller.add(fileDescriptor: core.io.signal.fileDescriptor, events: .readable)
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
            // While draining, requests are still read, to be answered `unavailable` at once.
            receiveRequests()
            if runCommands() && accepting {
                accepting = false
                drainDeadline = .now + core.configuration.drainTimeout
                core.logger.debug("rpc server draining \(pending.count) requests")
            }
            if !accepting {
                if pending.isEmpty { break }
                if let deadline = drainDeadline, deadline <= .now { break }
            }
        }
        close()
    }

    /// Answers what is still pending and closes. Replies queued before the queue closes are
    /// sent; every request still without one is answered `unavailable` and its task cancelled;
    /// jobs left (handlers still running or not started) go to the global executor, where a
    /// task that had not started returns without running (`Core.closed`).
    private func close() {
        core.closed.store(true, ordering: .releasing)
        core.io.close(into: &commands)
        var jobs: [UnownedJob] = []
        for command in commands {
            switch command {
            case let .reply(slot, header, body):
                if let entry = pending.remove(slot) { send(identity: entry.identity, header: header, body: body) }
            case .job(let job):
                jobs.append(job)
            case .stop:
                break
            }
        }
        commands.removeAll()
        let unanswered = pending.removeAll()
        if !unanswered.isEmpty {
            core.logger.warning("rpc server stopped with \(unanswered.count) requests unfinished; answered them unavailable")
        }
        for entry in unanswered {
            entry.task?.cancel()
            reply(identity: entry.identity, requestID: entry.requestID, error: RPCError(
                .unavailable, "the service shut down before the request finished; it may or may not have been carried out"))
        }
        for job in jobs { globalConcurrentExecutor.enqueue(job) }
        // libzmq sends the replies within the 1 s linger; a client reads them even when the
        // connection closes right behind them (`ClientSocket`).
        socket.close()
        socket.releaseZAPDomain(zapDomain)
    }

    /// Runs queued jobs and sends queued replies, a few rounds while running them queues more
    /// (a handler's reply is queued by the job that ran it). Returns whether a stop was asked for.
    private func runCommands() -> Bool {
        var stopAsked = false
        for _ in 0..<4 {
            core.io.take(into: &commands)
            if commands.isEmpty { break }
            for command in commands {
                switch command {
                case let .reply(slot, header, body):
                    if let entry = pending.remove(slot) { send(identity: entry.identity, header: header, body: body) }
                case .job(let job):
                    job.runSynchronously(on: core.executor.asUnownedTaskExecutor())
                case .stop:
                    stopAsked = true
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
        /// Decoded in place; a valid `traceparent` is parsed apart (no string made for it).
        case decoded(RequestHeader, TraceParent?)
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
                            var trace: TraceParent?
                            header = RequestHeader.fastDecode(bytes, trace: &trace).map { .decoded($0, trace) } ?? .raw(Array(bytes))
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
                // Who is calling, as the ZAP handler named the connection (the frames read from
                // the wire carry it; the routing-id frame ROUTER adds does not): read only when
                // methods are authorised per role.
                let userID = core.configuration.callerRoles == nil ? nil : socket.lastFrameProperty("User-Id")
                dispatch(identity: identity, header: header, body: body, frameCount: frameCount, userID: userID)
            } catch {
                core.logger.error("rpc server receive failed: \(error)")
                return
            }
        }
    }

    /// Logs a `permission_denied` at warning, at most once a minute per client key and method
    /// (with the count since), so a misconfigured or hostile client cannot flood the log.
    private func logRefusal(method: String, userID: String?) {
        let key = "\(userID ?? "(none)") \(method)"
        let now = ContinuousClock.now
        if let last = refusalsLogged[key], now - last.at < .seconds(60) {
            refusalsLogged[key] = (last.at, last.since + 1)
            return
        }
        let since = refusalsLogged[key]?.since ?? 0
        if refusalsLogged.count >= 1024 { refusalsLogged.removeAll() }
        refusalsLogged[key] = (now, 0)
        let more = since > 0 ? " (\(since) more since the last report)" : ""
        core.logger.warning("rpc server refused \(method) to client key \(userID ?? "(none)"): its role may not call it\(more)")
    }

    private func dispatch(identity: [UInt8], header headerFrame: HeaderFrame?, body: [UInt8], frameCount: Int, userID: String?) {
        let received = ContinuousClock.now
        func peekRequestID() -> UInt64? {
            switch headerFrame {
            case .decoded(let header, _): header.requestID
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
        var wireTrace: TraceParent?
        switch headerFrame {
        case .decoded(let decoded, let trace):
            header = decoded
            wireTrace = trace
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
        guard accepting else {
            reply(identity: identity, requestID: header.requestID, error: RPCError(.unavailable, "the service is shutting down"))
            return
        }
        if let roles = core.configuration.callerRoles, !roles.permits(userID, method: header.method, router: core.router) {
            logRefusal(method: header.method, userID: userID)
            reply(identity: identity, requestID: header.requestID, error: RPCError(
                .permissionDenied, "this client's key may not call \(header.method)"))
            return
        }
        let timeout = header.timeoutMs == 0 ? core.configuration.defaultTimeout : .milliseconds(header.timeoutMs)
        let deadline = received + timeout
        // The caller's trace; a request that came without one (or with a malformed one) starts
        // its own, so its log lines and the calls it makes can still be followed.
        if wireTrace == nil, !header.traceParent.isEmpty { wireTrace = TraceParent(header.traceParent) }
        let trace = wireTrace ?? TraceParent.random()
        if core.configuration.handlerExecutor == .ioThread, let handler = core.router.syncHandler(for: header.method) {
            // Answered here and now: no task, no job, the reply goes out in this wake-up. Such a
            // handler makes no calls, so its trace is not bound to a task: its log lines get the
            // trace id from `context.logger`.
            let context = RPCContext(
                requestID: header.requestID, method: header.method, deadline: deadline, trace: trace, logger: core.logger)
            var replyHeader = ReplyHeader(requestID: header.requestID, error: nil)
            var replyBody: [UInt8] = []
            do {
                replyBody = try handler(body, context)
            } catch {
                replyHeader.error = RPCRouter.wireError(error, method: header.method, logger: context.logger)
            }
            if core.logsRequests { core.logHandled(context, error: replyHeader.error, received: received) }
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
            requestID: header.requestID, method: header.method, deadline: deadline, trace: trace, logger: core.logger)
        let core = self.core
        let slot = pending.insert(identity: identity, requestID: header.requestID)
        let executor: (any TaskExecutor)? = core.configuration.handlerExecutor == .ioThread ? core.executor : nil
        let task = Task(executorPreference: executor) {
            defer { core.finished() }
            // Given up at shutdown before it started: its caller has its answer (`unavailable`).
            if core.closed.load(ordering: .acquiring) { return }
            var replyHeader = ReplyHeader(requestID: context.requestID, error: nil)
            var replyBody: [UInt8] = []
            if ContinuousClock.now < deadline {
                do {
                    // Bound to the task: log lines written on the way carry the trace id, and
                    // calls the handler makes send the trace on.
                    replyBody = try await TraceContext.$current.withValue(trace) { try await handler(body, context) }
                } catch {
                    replyHeader.error = RPCRouter.wireError(error, method: context.method, logger: context.logger)
                }
            } else {
                // Waited past its deadline (behind other work): refused without running, and
                // said so, so the caller does not wait for a reply that will not come.
                replyHeader.error = RPCError.deadlinePassed(context.method)
            }
            if core.logsRequests { core.logHandled(context, error: replyHeader.error, received: received) }
            let headerBytes = (try? replyHeader.encoded())
                ?? (try? ReplyHeader(requestID: context.requestID, error: RPCError(.internal, "internal error")).encoded()) ?? []
            core.io.submit(.reply(slot: slot, header: headerBytes, body: replyBody))
        }
        pending.attach(task, to: slot)
    }
}
