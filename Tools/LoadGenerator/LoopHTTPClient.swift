#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// The `loop` engine: plain HTTP/1.1 keep-alive connections on non-blocking sockets, driven by
/// event-loop threads that are also the virtual users' task executors.
///
/// Why: on a 2-core machine the load generator shares the cores with the server it measures, so
/// every microsecond it spends per request is taken from the server. With the `nio` engine a
/// request crossed threads twice (a virtual user's task on Swift's pool hands the request to a
/// NIO event loop, whose reply resumes the task on the pool again) and went through a channel
/// pipeline, `ByteBuffer`s, `HTTPHeaders`, a promise and a timer: about 57 µs of CPU per checked
/// refresh. Here a virtual user's task runs *on* the loop thread that owns its connection
/// (`executor(for:)`): it writes its request to the socket itself, and the loop, when the reply
/// is read and parsed, resumes the task in the same wake-up, on the same thread.
///
/// One connection per request in flight: a request takes an idle connection of its loop or opens
/// one; a connection the server closed, that failed, timed out or answered with
/// `Connection: close` is dropped, never reused. Responses are parsed by `HTTPResponseParser`.
final class LoopHTTPClient: Sendable {
    struct Failure: Error, CustomStringConvertible {
        enum Kind: String { case timeout, connectionClosed = "connection_closed", bodyTooLarge = "body_too_large", connect, io, protocolError = "protocol" }
        var kind: Kind
        var description: String
    }

    let loops: [EventLoopThread]
    let address: SocketAddress
    let hostHeader: String
    let pathPrefix: String
    let timeoutNanos: UInt64
    let maxBody: Int
    private let nextLoop = Atomic<Int>(0)

    init(loops: [EventLoopThread], address: SocketAddress, hostHeader: String, pathPrefix: String, timeout: Double, maxBody: Int) {
        self.loops = loops
        self.address = address
        self.hostHeader = hostHeader
        self.pathPrefix = pathPrefix
        self.timeoutNanos = UInt64(timeout * 1e9)
        self.maxBody = maxBody
    }

    /// Builds a client for `target` (an `http://` base URL checked by `TargetGuard`) with `threads`
    /// event-loop threads.
    static func make(target: Target, threads: Int, timeout: Double, maxBody: Int, poller: PollerKind = .default) throws -> LoopHTTPClient {
        guard let components = URLComponents(string: target.baseURL), components.scheme?.lowercased() == "http" else {
            throw LoadError.invalidURL("'\(target.baseURL)': the loop engine speaks plain http only (use --engine async-http-client)")
        }
        let port = components.port ?? 80
        guard (1...65535).contains(port) else { throw LoadError.invalidURL("'\(target.baseURL)': bad port") }
        // Connect to the address the guard checked, so nothing is resolved twice.
        let address: SocketAddress
        if let checked = target.addresses.first(where: { !$0.contains(":") }) ?? target.addresses.first,
           let parsed = SocketAddress(numeric: checked, port: UInt16(port)) {
            address = parsed
        } else {
            address = try SocketAddress.resolve(host: components.host ?? target.host, port: UInt16(port))
        }
        let hostHeader = components.port.map { "\(components.host ?? target.host):\($0)" } ?? (components.host ?? target.host)
        var prefix = components.percentEncodedPath
        while prefix.hasSuffix("/") { prefix.removeLast() }
        let loops = try (0..<max(threads, 1)).map { try EventLoopThread(name: "load-loop-\($0)", poller: poller) }
        return LoopHTTPClient(loops: loops, address: address, hostHeader: hostHeader, pathPrefix: prefix, timeout: timeout, maxBody: maxBody)
    }

    /// The executor virtual user `index` runs on (its requests then cross no thread).
    func executor(for index: Int) -> any TaskExecutor { loops[index % loops.count].executor }

    /// The bytes of one request: request line, `Host`, the given headers, `Content-Length` when
    /// there is a body, and the body.
    func serialize(method: String, path: String, headers: [(String, String)], body: [UInt8]?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160 + (body?.count ?? 0) + headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 })
        out.append(contentsOf: method.utf8)
        out.append(32)
        out.append(contentsOf: pathPrefix.utf8)
        out.append(contentsOf: path.utf8)
        out.append(contentsOf: " HTTP/1.1\r\nHost: ".utf8)
        out.append(contentsOf: hostHeader.utf8)
        out.append(contentsOf: "\r\n".utf8)
        for (name, value) in headers {
            out.append(contentsOf: name.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: value.utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
        if let body {
            out.append(contentsOf: "Content-Length: ".utf8)
            out.append(contentsOf: String(body.count).utf8)
            out.append(contentsOf: "\r\n\r\n".utf8)
            out.append(contentsOf: body)
        } else {
            out.append(contentsOf: "\r\n".utf8)
        }
        return out
    }

    /// Sends one request and waits for the whole response. From a task already on one of the
    /// loops this crosses no thread; from anywhere else it hops to a loop first.
    func execute(method: String, path: String, headers: [(String, String)], body: [UInt8]?) async throws -> (status: Int, body: [UInt8]) {
        let request = serialize(method: method, path: path, headers: headers, body: body)
        for loop in loops where loop.isCurrent {
            return try await loop.send(request, to: address, timeoutNanos: timeoutNanos, maxBody: maxBody)
        }
        let loop = loops[nextLoop.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
        return try await withTaskExecutorPreference(loop.executor) {
            try await loop.send(request, to: self.address, timeoutNanos: self.timeoutNanos, maxBody: self.maxBody)
        }
    }

    /// Stops the loops, closing their connections.
    func shutdown() async {
        for loop in loops { await loop.stop() }
    }
}
