import Foundation
import Hummingbird
import Logging
import Synchronization

/// Starting and stopping the fake's HTTP server.
extension FakeOpenIDProvider {
    /// Why the fake could not start.
    public struct StartError: Error, CustomStringConvertible {
        /// What went wrong.
        public let description: String
    }

    /// Starts a fake publishing `keys` on 127.0.0.1 (an ephemeral port) and returns it with its
    /// base URL (`http://127.0.0.1:<port>`). It runs until `stop()`: call it when the test is over
    /// (a `defer` cannot await: stop it at the end of the test and in its error path).
    public static func start(keys: [TestSigningKey] = [.rsa1, .ec1]) async throws -> (fake: FakeOpenIDProvider, base: String) {
        let fake = FakeOpenIDProvider(keys: keys)
        let base = try await fake.start()
        return (fake, base)
    }

    /// Starts listening on 127.0.0.1 (an ephemeral port) and returns the base URL
    /// (`http://127.0.0.1:<port>`). A fake starts once; `stop()` ends it for good.
    public func start() async throws -> String {
        let first = state.withLock { state in
            defer { state.started = true }
            return !state.started
        }
        guard first else { throw StartError(description: "a FakeOpenIDProvider starts only once") }
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
        let server = Task {
            defer { continuation.finish() }
            try await app.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            server.cancel()
            _ = await server.result
            throw StartError(description: "the fake provider's server did not start on 127.0.0.1")
        }
        let base = "http://127.0.0.1:\(port)"
        state.withLock { state in
            state.baseURL = base
            state.server = server
        }
        return base
    }

    /// Releases any hanging request and stops the server (waits until it has stopped). Does
    /// nothing if the fake is not running.
    public func stop() async {
        let server = state.withLock { state in
            defer { state.server = nil }
            return state.server
        }
        hangs.open()
        guard let server else { return }
        server.cancel()
        _ = await server.result
    }

    /// Starts the fake, runs `body` with its base URL, then stops it (whether `body` threw or not).
    public func serve<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let base = try await start()
        let result: Result<T, any Error>
        do {
            result = .success(try await body(base))
        } catch {
            result = .failure(error)
        }
        await stop()
        return try result.get()
    }
}
