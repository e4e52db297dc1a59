import Foundation
import GatehouseContracts
import Logging
import ProtoCodec
import Synchronization
import ZeroMQ

/// One event: its topic (the event type, e.g. `user.created`) and its protobuf-encoded payload.
public struct Event: Sendable, Hashable {
    /// The topic, e.g. `user.created`.
    public var topic: String
    /// The encoded event message.
    public var payload: [UInt8]

    /// An event of `topic` carrying `payload`.
    public init(topic: String, payload: [UInt8]) {
        self.topic = topic
        self.payload = payload
    }

    /// Decodes the payload as `T`.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try ProtobufDecoder().decode(type, from: payload)
    }
}

/// Publishes best-effort events on a PUB socket (frames: topic, payload). Publishing never
/// blocks the caller: events go to the socket's I/O thread, and a subscriber that is gone or
/// too slow simply misses them. Never the only path for anything security relevant.
public final class EventPublisher: Sendable {
    enum Command: Sendable {
        case publish(Event)
        case stop
    }

    private let io: IOThread<Command>
    /// The endpoints bound, with wildcard ports resolved.
    public let endpoints: [String]

    /// Binds `endpoints` and starts the publisher's I/O thread.
    public init(endpoints: [String], curve: CurveServerKeys? = nil, context: ZMQContext = .shared, logger: Logger = Logger(label: "gatehouse.events")) throws {
        io = try IOThread()
        let socket = try context.socket(.pub)
        try socket.set([.linger(0), .sendHighWaterMark(100_000)])
        let zapDomain = try socket.configureCurveServer(curve, logger: logger)
        do { self.endpoints = try socket.bind(all: endpoints) } catch {
            socket.releaseZAPDomain(zapDomain)
            throw error
        }
        let loop = PublisherLoop(io: io, socket: socket, zapDomain: zapDomain, logger: logger)
        io.start(name: "events-pub") { loop.run() }
    }

    deinit { io.submit(.stop) }

    /// Publishes `payload` under `topic`.
    public func publish(topic: String, payload: [UInt8]) {
        io.submit(.publish(Event(topic: topic, payload: payload)))
    }

    /// Encodes `value` and publishes it under `topic`.
    public func publish<T: Encodable>(topic: String, _ value: T) throws {
        publish(topic: topic, payload: try ProtobufEncoder().encode(value))
    }

    /// Stops the I/O thread and closes the socket.
    public func close() async {
        io.submit(.stop)
        await io.join()
    }
}

private final class PublisherLoop {
    let io: IOThread<EventPublisher.Command>
    let socket: Socket
    let logger: Logger
    let poller = Poller()
    var commands: [EventPublisher.Command] = []
    let zapDomain: String?

    init(io: IOThread<EventPublisher.Command>, socket: Socket, zapDomain: String?, logger: Logger) {
        self.io = io
        self.socket = socket
        self.zapDomain = zapDomain
        self.logger = logger
    }

    func run() {
        poller.add(fileDescriptor: io.signal.fileDescriptor, events: .readable)
        loop: while true {
            do { _ = try poller.poll(timeoutMilliseconds: -1) } catch { break }
            io.drain(into: &commands)
            for command in commands {
                switch command {
                case .publish(let event):
                    do { try socket.send(multipart: [Array(event.topic.utf8), event.payload], dontWait: true) } catch {
                        logger.warning("could not publish \(event.topic): \(error)")
                    }
                case .stop:
                    break loop
                }
            }
        }
        socket.close()
        socket.releaseZAPDomain(zapDomain)
    }
}

/// Receives events from one or more PUB endpoints, filtered by topic prefix, as an async stream.
public final class EventSubscriber: Sendable {
    enum Command: Sendable { case stop }

    private let io: IOThread<Command>
    /// Events as they arrive. Buffers the newest 10,000 if the consumer falls behind.
    public let events: AsyncStream<Event>

    /// Connects to `endpoints` (reconnecting in the background) and subscribes to `topics`
    /// (prefixes; `[""]` for everything). One socket per endpoint, each on `context`, or when nil
    /// on `ZMQContext.forConnecting(to:)` its endpoint's: a slow name lookup of one publisher
    /// (stopped, its name no longer answered at once) delays no other publisher's events.
    public init(endpoints: [String], topics: [String], curve: CurveClientKeys? = nil, context: ZMQContext? = nil, logger: Logger = Logger(label: "gatehouse.events")) throws {
        io = try IOThread()
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(10_000))
        events = stream
        var sockets: [Socket] = []
        for endpoint in endpoints {
            let socket = try (context ?? .forConnecting(to: endpoint)).socket(.sub)
            try socket.set([.linger(0), .reconnectInterval(100), .reconnectIntervalMax(1000), .maxMessageSize(1 << 20)])
            try socket.configureCurveClient(curve)
            for topic in topics { try socket.set(.subscribe(Array(topic.utf8))) }
            try socket.connect(endpoint)
            sockets.append(socket)
        }
        let loop = SubscriberLoop(io: io, sockets: sockets, continuation: continuation, logger: logger)
        io.start(name: "events-sub") { loop.run() }
    }

    deinit { io.submit(.stop) }

    /// Stops receiving and finishes the stream.
    public func close() async {
        io.submit(.stop)
        await io.join()
    }
}

private final class SubscriberLoop {
    let io: IOThread<EventSubscriber.Command>
    let sockets: [Socket]
    let continuation: AsyncStream<Event>.Continuation
    let logger: Logger
    let poller = Poller()
    var commands: [EventSubscriber.Command] = []

    init(io: IOThread<EventSubscriber.Command>, sockets: [Socket], continuation: AsyncStream<Event>.Continuation, logger: Logger) {
        self.io = io
        self.sockets = sockets
        self.continuation = continuation
        self.logger = logger
    }

    func run() {
        for socket in sockets { poller.add(socket, events: .readable) }
        poller.add(fileDescriptor: io.signal.fileDescriptor, events: .readable)
        loop: while true {
            do { _ = try poller.poll(timeoutMilliseconds: -1) } catch { break }
            io.drain(into: &commands)
            if !commands.isEmpty { break loop }
            do {
                for socket in sockets {
                    while let frames = try socket.receiveMultipart(dontWait: true) {
                        guard frames.count == 2 else {
                            logger.warning("dropping an event of \(frames.count) frames")
                            continue
                        }
                        continuation.yield(Event(topic: String(decoding: frames[0], as: UTF8.self), payload: frames[1]))
                    }
                }
            } catch {
                logger.error("event subscriber failed: \(error)")
                break
            }
        }
        continuation.finish()
        for socket in sockets { socket.close() }
    }
}
