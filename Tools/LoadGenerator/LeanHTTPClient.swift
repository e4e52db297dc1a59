import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The `nio` engine: a minimal HTTP/1.1 client on SwiftNIO (the default engine is now `loop`,
/// `LoopHTTPClient`, which spends less than half of this one's CPU per request). Keep-alive
/// connections, one request in flight per connection, each request written as a prepared head and body through NIO's
/// `HTTPRequestEncoder` and each response parsed by its `HTTPResponseDecoder` (llhttp).
///
/// Why not AsyncHTTPClient for the measured phase: on this 2-core machine the load generator
/// shares the cores with the server it measures, and AsyncHTTPClient spent about 250 µs of CPU
/// per request (request and transaction state machines, a body stream, `JSONSerialization` for
/// the request body) — more than the bare-JWT ceiling route it was measuring. This client
/// spends a fraction of that, so more of the machine goes to the server. AsyncHTTPClient
/// remains available (`--engine async-http-client`) and is what `https://` targets use.
///
/// Plain `http://` only. Connections are pooled: a request takes an idle connection or opens
/// one (at most one per virtual user, since each has one request in flight), and a connection
/// that fails or is closed by the server is dropped, never reused.
final class LeanHTTPClient: Sendable {
    struct Failure: Error, CustomStringConvertible {
        enum Kind: String { case timeout, connectionClosed = "connection_closed", bodyTooLarge = "body_too_large" }
        var kind: Kind
        var description: String
    }

    let group: any EventLoopGroup
    /// Where to connect (a resolved address when the target guard pinned one).
    let host: String
    let port: Int
    /// Request-target prefix from the base URL (`""` or `/prefix`).
    let pathPrefix: String
    /// The `Host` header.
    let hostHeader: String
    let timeout: TimeAmount
    let maxBody: Int
    private let idle = Mutex<[Connection]>([])

    init(group: any EventLoopGroup, connectHost: String, port: Int, hostHeader: String, pathPrefix: String, timeout: TimeAmount, maxBody: Int) {
        self.group = group
        self.host = connectHost
        self.port = port
        self.hostHeader = hostHeader
        self.pathPrefix = pathPrefix
        self.timeout = timeout
        self.maxBody = maxBody
    }

    /// Builds a client for `target` (an `http://` base URL checked by `TargetGuard`).
    static func make(target: Target, group: any EventLoopGroup, timeout: Double, maxBody: Int) throws -> LeanHTTPClient {
        guard let components = URLComponents(string: target.baseURL), components.scheme?.lowercased() == "http" else {
            throw LoadError.invalidURL("'\(target.baseURL)': the nio engine speaks plain http only (use --engine async-http-client)")
        }
        let port = components.port ?? 80
        // Connect to the address the guard checked, so nothing is resolved twice.
        let connectHost = target.addresses.first(where: { !$0.contains(":") }) ?? target.addresses.first ?? target.host
        let hostHeader = components.port.map { "\(components.host ?? target.host):\($0)" } ?? (components.host ?? target.host)
        var prefix = components.percentEncodedPath
        while prefix.hasSuffix("/") { prefix.removeLast() }
        return LeanHTTPClient(
            group: group, connectHost: connectHost, port: port, hostHeader: hostHeader, pathPrefix: prefix,
            timeout: .nanoseconds(Int64(timeout * 1e9)), maxBody: maxBody)
    }

    /// One request, ready to write: the head (with `Host` and `Content-Length`) and the body.
    struct PreparedRequest: Sendable {
        var head: HTTPRequestHead
        var body: ByteBuffer?
    }

    func prepare(method: String, path: String, headers: [(String, String)], body: [UInt8]?) -> PreparedRequest {
        var fields = HTTPHeaders()
        fields.reserveCapacity(headers.count + 2)
        fields.add(name: "Host", value: hostHeader)
        for (name, value) in headers { fields.add(name: name, value: value) }
        if let body { fields.add(name: "Content-Length", value: String(body.count)) }
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method), uri: pathPrefix + path, headers: fields)
        return PreparedRequest(head: head, body: body.map { ByteBuffer(bytes: $0) })
    }

    /// Sends one request and waits for the whole response.
    func execute(method: String, path: String, headers: [(String, String)], body: [UInt8]?) async throws -> (status: Int, body: ByteBuffer) {
        let request = prepare(method: method, path: path, headers: headers, body: body)
        let connection: Connection
        if let reused = idle.withLock({ $0.popLast() }) {
            connection = reused
        } else {
            connection = try await connect()
        }
        do {
            let response = try await connection.send(request, timeout: timeout).get()
            if connection.reusable {
                idle.withLock { $0.append(connection) }
            } else {
                connection.close()
            }
            return response
        } catch {
            connection.close()
            throw error
        }
    }

    private func connect() async throws -> Connection {
        let maxBody = self.maxBody
        let channel = try await ClientBootstrap(group: group)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ResponseCollector(maxBody: maxBody))
                }
            }
            .connect(host: host, port: port).get()
        let collector = try await channel.pipeline.handler(type: ResponseCollector.self).get()
        return Connection(channel: channel, collector: collector)
    }

    /// Closes the idle connections.
    func shutdown() async {
        let connections = idle.withLock { all -> [Connection] in
            defer { all = [] }
            return all
        }
        for connection in connections { try? await connection.channel.close() }
    }

    /// One keep-alive connection and its response collector.
    final class Connection: Sendable {
        let channel: any Channel
        let collector: ResponseCollector
        private let open = Atomic<Bool>(true)

        init(channel: any Channel, collector: ResponseCollector) {
            self.channel = channel
            self.collector = collector
        }

        /// False once the connection failed, timed out or the server asked to close it.
        var reusable: Bool { open.load(ordering: .relaxed) && channel.isActive }

        func send(_ request: PreparedRequest, timeout: TimeAmount) -> EventLoopFuture<(status: Int, body: ByteBuffer)> {
            let loop = channel.eventLoop
            let promise = loop.makePromise(of: (status: Int, body: ByteBuffer).self)
            loop.execute { [self] in
                let collector = self.collector
                collector.start(promise, connection: self)
                let timer = loop.scheduleTask(in: timeout) {
                    collector.fail(Failure(kind: .timeout, description: "no response within \(timeout.nanoseconds / 1_000_000) ms"))
                }
                promise.futureResult.whenComplete { _ in timer.cancel() }
                channel.write(HTTPClientRequestPart.head(request.head), promise: nil)
                if let body = request.body { channel.write(HTTPClientRequestPart.body(.byteBuffer(body)), promise: nil) }
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            }
            return promise.futureResult
        }

        func markClosed() { open.store(false, ordering: .relaxed) }

        func close() {
            markClosed()
            channel.close(promise: nil)
        }
    }
}

/// Gathers each response (status and body) for the waiting request. Every member is used on
/// the channel's event loop only (`Connection.send` hops there), hence `@unchecked`.
final class ResponseCollector: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart

    let maxBody: Int
    private var promise: EventLoopPromise<(status: Int, body: ByteBuffer)>?
    private weak var connection: LeanHTTPClient.Connection?
    private var status = 0
    private var body = ByteBuffer()
    private var tooLarge = false

    init(maxBody: Int) { self.maxBody = maxBody }

    func start(_ promise: EventLoopPromise<(status: Int, body: ByteBuffer)>, connection: LeanHTTPClient.Connection) {
        self.promise = promise
        self.connection = connection
        status = 0
        body.clear()
        tooLarge = false
    }

    func fail(_ error: any Error) {
        // The promise first: closing runs `channelInactive` at once, which would report a close.
        let failed = promise
        promise = nil
        failed?.fail(error)
        connection?.close()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
            if !head.isKeepAlive { connection?.markClosed() }
        case .body(var part):
            if body.readableBytes + part.readableBytes > maxBody {
                tooLarge = true
            } else {
                body.writeBuffer(&part)
            }
        case .end:
            if tooLarge {
                fail(LeanHTTPClient.Failure(kind: .bodyTooLarge, description: "response body over \(maxBody) bytes"))
            } else {
                let response = (status: status, body: body)
                body = ByteBuffer()
                let done = promise
                promise = nil
                done?.succeed(response)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection?.markClosed()
        let failed = promise
        promise = nil
        failed?.fail(LeanHTTPClient.Failure(kind: .connectionClosed, description: "the server closed the connection"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }
}
