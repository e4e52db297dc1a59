import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An OpenID provider served over real HTTP on 127.0.0.1 by the test: discovery
/// (`/.well-known/openid-configuration`), a JWKS (`/jwks`) whose keys and `Cache-Control` the
/// test sets, a count of JWKS fetches, and failure modes (down: 503; hanging: never answers;
/// a body that stops half way).
final class FakeOpenIDProvider: Sendable {
    enum Mode: Sendable {
        /// Answers normally.
        case up
        /// Answers 503 to everything.
        case down
        /// Never answers the JWKS request (until the fake stops).
        case hang
        /// Sends the JWKS response's head and the first bytes of its body, then nothing more.
        case hangInBody
    }

    struct State {
        var mode = Mode.up
        var keys: [TestSigningKey] = [TestSigningKey.rsa1, TestSigningKey.ec1]
        var cacheControl: String? = "public, max-age=3600"
        /// Overrides the `issuer` of the discovery document (nil: the fake's own base URL).
        var discoveryIssuer: String?
        /// Overrides the `jwks_uri` of the discovery document.
        var discoveryJWKSURI: String?
        var jwksFetches = 0
        var discoveryFetches = 0
        var baseURL = ""
    }

    let state = Mutex(State())
    private let hangs = Gate()

    /// Replaces the published keys (a rotation).
    func publish(_ keys: [TestSigningKey]) { state.withLock { $0.keys = keys } }
    func set(mode: Mode) { state.withLock { $0.mode = mode } }
    func set(cacheControl: String?) { state.withLock { $0.cacheControl = cacheControl } }
    var jwksFetches: Int { state.withLock { $0.jwksFetches } }
    var discoveryFetches: Int { state.withLock { $0.discoveryFetches } }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/.well-known/openid-configuration") { _, _ -> Response in
            let (mode, issuer, jwksURI) = self.state.withLock { state in
                state.discoveryFetches += 1
                return (state.mode, state.discoveryIssuer ?? state.baseURL, state.discoveryJWKSURI ?? state.baseURL + "/jwks")
            }
            if mode == .down { return Self.unavailable() }
            return Self.json(["issuer": issuer, "jwks_uri": jwksURI, "id_token_signing_alg_values_supported": ["RS256", "ES256"]])
        }
        router.get("/jwks") { _, _ -> Response in
            let (mode, keys, cacheControl) = self.state.withLock { state in
                state.jwksFetches += 1
                return (state.mode, state.keys, state.cacheControl)
            }
            switch mode {
            case .up:
                return Self.json(["keys": keys.map(\.jwk)], cacheControl: cacheControl)
            case .down:
                return Self.unavailable()
            case .hang:
                await self.hangs.wait()
                return Self.unavailable()
            case .hangInBody:
                let gate = self.hangs
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: ResponseBody { writer in
                        try await writer.write(ByteBuffer(string: #"{"keys":["#))
                        await gate.wait()
                        try await writer.write(ByteBuffer(string: "]}"))
                        try await writer.finish(nil)
                    })
            }
        }
        return router
    }

    static func json(_ object: Any, cacheControl: String? = nil) -> Response {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        var headers: HTTPFields = [.contentType: "application/json"]
        if let cacheControl { headers[.cacheControl] = cacheControl }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func unavailable() -> Response {
        Response(status: .serviceUnavailable, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "down")))
    }

    /// Starts the fake on 127.0.0.1 (an ephemeral port), runs `body` with its base URL, then
    /// releases any hanging request and stops it.
    func serve<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "fake-openid-provider")
        logger.logLevel = .critical
        let app = Application(
            router: router(),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                continuation.yield(channel.localAddress?.port ?? 0)
                continuation.finish()
            },
            logger: logger
        )
        let server = Task { try await app.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            server.cancel()
            throw CancellationError()
        }
        let base = "http://127.0.0.1:\(port)"
        state.withLock { $0.baseURL = base }
        let result: Result<T, any Error>
        do {
            result = .success(try await body(base))
        } catch {
            result = .failure(error)
        }
        hangs.open()
        server.cancel()
        _ = await server.result
        return try result.get()
    }
}

/// Requests wait here until the test is over.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A loopback TCP port that is bound but not listening: a connection to it is refused, and no
/// other test can take the port while this holds it.
final class RefusingPort: Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        descriptor = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    deinit { close(descriptor) }
}
