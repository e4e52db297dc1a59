import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// Runs one load test: check the target, set up users, warm up, measure, report.
public struct LoadRunner: Sendable {
    /// The run's configuration, checked when `run` starts.
    public let configuration: LoadConfiguration

    /// A runner for `configuration`; nothing is checked or sent until `run`.
    public init(_ configuration: LoadConfiguration) {
        self.configuration = configuration
    }

    /// Runs to completion. Throws ``LoadError`` when the configuration or target is refused (before
    /// anything is sent) or when setup cannot create its users. Errors of measured requests are
    /// counted in the result, never thrown.
    public func run(progress: @escaping @Sendable (String) -> Void = { _ in }) async throws -> LoadResult {
        let config = configuration
        try config.validate()
        guard config.scenario != .stream else {
            throw LoadError.invalidConfiguration("the stream scenario runs with StreamLoadRunner")
        }
        // The guard runs before any client or connection exists.
        let target = try TargetGuard.check(url: config.url, allowRemote: config.allowRemote)

        var clientConfig = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Int64(min(config.timeout, 10) * 1000)),
                           read: .milliseconds(Int64(config.timeout * 1000))),
            connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: config.concurrency),
            decompression: .disabled
        )
        clientConfig.httpVersion = .http1Only
        // A refused connection is an error to count, not something to hide behind retries.
        clientConfig.connectionPool.retryConnectionEstablishment = false
        // Pin a resolved name to the loopback address the guard saw (no second lookup to trust).
        if !config.allowRemote, !target.addresses.contains(target.host),
           let pinned = target.addresses.first(where: { !$0.contains(":") }) ?? target.addresses.first {
            clientConfig.dnsOverride = [target.host: pinned]
        }
        let engine: Engine
        switch config.engine {
        case .loop where target.baseURL.lowercased().hasPrefix("http://"):
            engine = .loop(try LoopHTTPClient.make(target: target, threads: config.threads, timeout: config.timeout, maxBody: Run.maxBody))
        case .nio where target.baseURL.lowercased().hasPrefix("http://"):
            engine = .lean(try LeanHTTPClient.make(
                target: target, group: MultiThreadedEventLoopGroup.singleton, timeout: config.timeout, maxBody: Run.maxBody))
        case .loop, .nio, .asyncHTTPClient:
            engine = .asyncHTTPClient(HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: clientConfig))
        }
        do {
            let result = try await Run(config: config, target: target, engine: engine, progress: progress).execute()
            await engine.shutdown()
            return result
        } catch {
            await engine.shutdown()
            throw error
        }
    }
}

/// The HTTP client a run uses.
enum Engine: Sendable {
    case asyncHTTPClient(HTTPClient)
    case lean(LeanHTTPClient)
    case loop(LoopHTTPClient)

    func shutdown() async {
        switch self {
        case .asyncHTTPClient(let client): try? await client.shutdown()
        case .lean(let client): await client.shutdown()
        case .loop(let client): await client.shutdown()
        }
    }

    /// Where virtual user `index` runs: on its loop thread with the `loop` engine (its requests
    /// then cross no thread), on Swift's pool otherwise.
    func executor(for index: Int) -> (any TaskExecutor)? {
        if case .loop(let client) = self { return client.executor(for: index) }
        return nil
    }
}
