import Foundation
import GatehouseProtocol
import Logging
import ProtoCodec
import ZeroMQ

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
        poller.add(fileDescriptor: core.io.signal.fileDescriptor, events: .readable)
        var accepting = true
        var drainDeadline: ContinuousClock.Instant?
        while true {
            do {
                _ = try poller.poll(timeoutMilliseconds: pollTimeout(until: drainDeadline))
            } catch {
                core.logger.error("rpc server poll failed: \(error)")
                break
            }
            core.io.drain(into: &commands)
            for command in commands {
                switch command {
                case let .reply(identity, header, body):
                    send([identity, header, body])
                case .job(let job):
                    job.runSynchronously(on: core.executor.asUnownedTaskExecutor())
                case .stop:
                    if accepting {
                        accepting = false
                        drainDeadline = .now + core.configuration.drainTimeout
                        poller.setEvents([], at: socketIndex)
                        core.logger.debug("rpc server draining \(core.inFlight.load(ordering: .relaxed)) requests")
                    }
                }
            }
            if accepting {
                receiveRequests()
            } else {
                if core.inFlight.load(ordering: .acquiring) == 0 { break }
                if let deadline = drainDeadline, deadline <= .now {
                    core.logger.warning("rpc server stopped with \(core.inFlight.load(ordering: .relaxed)) requests unfinished")
                    break
                }
            }
        }
        // Replies queued by the last handlers.
        core.io.drain(into: &commands)
        for command in commands {
            switch command {
            case let .reply(identity, header, body): send([identity, header, body])
            case .job(let job): job.runSynchronously(on: core.executor.asUnownedTaskExecutor())
            case .stop: break
            }
        }
        // Over tcp, replies queued just before zmq_close were sometimes never delivered despite
        // the 1 s linger (seen in the ServiceGroup drain test, ~1 in 3 runs). Until the cause is
        // found, give libzmq's I/O thread a moment to hand them to the kernel.
        usleep(100_000)
        socket.close()
        socket.releaseZAPDomain(zapDomain)
    }

    private func send(_ frames: [[UInt8]]) {
        do {
            if try !socket.send(multipart: frames, dontWait: true) {
                core.logger.warning("rpc server dropped a reply: the peer's queue is full")
            }
        } catch {
            core.logger.warning("rpc server could not send a reply: \(error)")
        }
    }

    private func reply(identity: [UInt8], requestID: UInt64, error: RPCError) {
        let header = (try? ProtobufEncoder().encode(ReplyHeader(requestID: requestID, error: error))) ?? []
        send([identity, header, []])
    }

    private func receiveRequests() {
        // Bounded so replies and shutdown are not starved by a flood of requests.
        for _ in 0..<1024 {
            let frames: [[UInt8]]
            do {
                guard let received = try socket.receiveMultipart(dontWait: true) else { return }
                frames = received
            } catch {
                core.logger.error("rpc server receive failed: \(error)")
                return
            }
            dispatch(frames)
        }
    }

    private func dispatch(_ frames: [[UInt8]]) {
        let received = ContinuousClock.now
        guard frames.count == 3 else {
            if frames.count >= 2, let id = RequestHeader.peekRequestID(frames[1]) {
                reply(identity: frames[0], requestID: id, error: RPCError(.malformedRequest, "a request has two frames: header and body"))
            } else {
                core.logger.warning("rpc server dropped a message of \(frames.count) frames that is not a request")
            }
            return
        }
        let identity = frames[0]
        let header: RequestHeader
        do {
            header = try ProtobufDecoder().decode(RequestHeader.self, from: frames[1])
        } catch {
            if let id = RequestHeader.peekRequestID(frames[1]) {
                reply(identity: identity, requestID: id, error: RPCError(.malformedRequest, "the request header does not decode"))
            } else {
                core.logger.warning("rpc server dropped a request whose header does not decode: \(error)")
            }
            return
        }
        guard header.version == rpcProtocolVersion else {
            reply(identity: identity, requestID: header.requestID, error: RPCError(
                .unsupportedVersion, "protocol version \(header.version) is not supported; this server speaks \(rpcProtocolVersion)",
                details: ["supported": "\(rpcProtocolVersion)"]))
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
        let timeout = header.timeoutMs == 0 ? core.configuration.defaultTimeout : .milliseconds(header.timeoutMs)
        let deadline = received + timeout
        var logger = core.logger
        logger[metadataKey: "rpc.id"] = "\(header.requestID)"
        let context = RPCContext(
            requestID: header.requestID, method: header.method, deadline: deadline,
            traceParent: header.traceParent, logger: logger)
        let body = frames[2]
        let core = self.core
        let executor: (any TaskExecutor)? = core.configuration.handlerExecutor == .ioThread ? core.executor : nil
        Task(executorPreference: executor) {
            defer { core.finished() }
            guard ContinuousClock.now < deadline else {
                context.logger.debug("dropping \(context.method): its deadline passed before it started")
                return
            }
            var replyHeader = ReplyHeader(requestID: context.requestID, error: nil)
            var replyBody: [UInt8] = []
            do {
                replyBody = try await handler(body, context)
            } catch {
                replyHeader.error = RPCRouter.wireError(error, method: context.method, logger: context.logger)
            }
            guard let headerBytes = try? ProtobufEncoder().encode(replyHeader) else { return }
            core.io.submit(.reply(identity: identity, header: headerBytes, body: replyBody))
        }
    }
}
