import Foundation
import GatehouseSupport
import IdentityService
import Logging
import ServiceLifecycle

/// Runs the identity service's `AnonymousSweep` every `interval` until graceful shutdown: the
/// first pass a minute after start (or one interval, if shorter; never in the start-up path),
/// then one per interval. A failed pass is logged and tried again at the next interval; it never
/// ends the process. With no interval, or a sweep whose retention is 0, it only waits for shutdown.
public struct AnonymousSweeper: Service {
    let sweep: AnonymousSweep
    let interval: Duration?
    let logger: Logger
    var firstDelay: Duration = .seconds(60)
    /// Waits between passes (tests replace it to run passes on demand, without waiting).
    var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }

    /// Sweeps until graceful shutdown (see the type).
    public func run() async throws {
        guard let interval, sweep.isEnabled else {
            try? await gracefulShutdown()
            return
        }
        try? await cancelWhenGracefulShutdown {
            var delay = min(firstDelay, interval)
            while true {
                try await sleep(delay)
                delay = interval
                do { _ = try await sweep.store.runIfLeader("anonymous-sweep") { try await sweep.sweep() } } catch is CancellationError { return } catch {
                    logger.warning("anonymous sweep failed; trying again in \(interval): \(error)")
                }
            }
        }
    }
}
