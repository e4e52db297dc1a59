import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// An OpenID provider served over real HTTP on 127.0.0.1 for tests: discovery
/// (`/.well-known/openid-configuration`), a JWKS (`/jwks`) whose keys and `Cache-Control` the
/// test sets, counts of the fetches, and failure modes (down: 503; hanging: never answers; a
/// body that stops half way).
///
/// Run it around a block with `serve { base in … }`, or keep it running across awaits with
/// `start()` … `stop()` (end-to-end tests: point the server under test at `base + "/jwks"`,
/// with plain http allowed on loopback). Tokens are minted with `TestSigningKey.idToken(…)`
/// using one of the published keys.
public final class FakeOpenIDProvider: Sendable {
    /// How the fake answers.
    public enum Mode: Sendable {
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
        var keys: [TestSigningKey]
        var cacheControl: String? = "public, max-age=3600"
        /// Overrides the `issuer` of the discovery document (nil: the fake's own base URL).
        var discoveryIssuer: String?
        /// Overrides the `jwks_uri` of the discovery document.
        var discoveryJWKSURI: String?
        var jwksFetches = 0
        var discoveryFetches = 0
        var baseURL: String?
        var server: Task<Void, any Error>?
        var started = false
    }

    let state: Mutex<State>
    /// Sign in with Apple's token and revoke endpoints (`/auth/token`, `/auth/revoke`) and its
    /// notifications, served by this fake.
    public let apple = FakeAppleEndpoints()
    /// Where the hanging modes hold their requests; opened when the fake stops.
    let hangs = Gate()

    /// A fake publishing `keys` (by default `rsa1` and `ec1`), up, with
    /// `Cache-Control: public, max-age=3600`; not yet listening.
    public init(keys: [TestSigningKey] = [.rsa1, .ec1]) {
        state = Mutex(State(keys: keys))
    }

    /// Replaces the published keys (a rotation).
    public func publish(_ keys: [TestSigningKey]) { state.withLock { $0.keys = keys } }
    /// Sets how the fake answers from now on.
    public func set(mode: Mode) { state.withLock { $0.mode = mode } }
    /// Sets the JWKS response's `Cache-Control` (nil: none).
    public func set(cacheControl: String?) { state.withLock { $0.cacheControl = cacheControl } }
    /// Makes the discovery document name `issuer` instead of the fake's base URL (nil: the base URL).
    public func set(discoveryIssuer issuer: String?) { state.withLock { $0.discoveryIssuer = issuer } }
    /// Makes the discovery document name `jwksURI` instead of `base/jwks` (nil: `base/jwks`).
    public func set(discoveryJWKSURI jwksURI: String?) { state.withLock { $0.discoveryJWKSURI = jwksURI } }
    /// How many times the JWKS was requested.
    public var jwksFetches: Int { state.withLock { $0.jwksFetches } }
    /// How many times the discovery document was requested.
    public var discoveryFetches: Int { state.withLock { $0.discoveryFetches } }
    /// `http://127.0.0.1:<port>` while the fake runs, nil before it started.
    public var baseURL: String? { state.withLock { $0.baseURL } }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/.well-known/openid-configuration") { _, _ -> Response in
            let (mode, issuer, jwksURI) = self.state.withLock { state in
                state.discoveryFetches += 1
                let base = state.baseURL ?? ""
                return (state.mode, state.discoveryIssuer ?? base, state.discoveryJWKSURI ?? base + "/jwks")
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
        apple.addRoutes(to: router, hangs: hangs)
        return router
    }

    static func json(_ object: Any, status: HTTPResponse.Status = .ok, cacheControl: String? = nil) -> Response {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        var headers: HTTPFields = [.contentType: "application/json"]
        if let cacheControl { headers[.cacheControl] = cacheControl }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func unavailable() -> Response {
        Response(status: .serviceUnavailable, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "down")))
    }
}
