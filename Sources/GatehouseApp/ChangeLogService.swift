import Foundation
import GatehouseSupport
import IdentityService
import Logging
import ServiceLifecycle

/// Runs the identity service's change log until graceful shutdown: the publisher's tail and
/// `identity.heartbeat` every `heartbeat`, and the prune at start and every `pruneInterval`. A
/// failed prune is logged and tried again at the next interval; it never ends the process.
public struct ChangeLogService: Service {
    let publisher: ChangeLogPublisher
    let heartbeat: Duration
    let prune: ChangeLogPrune
    let logger: Logger
    var pruneInterval: Duration = .seconds(60)

    /// Publishes and prunes until graceful shutdown (see the type).
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await publisher.run(heartbeat: heartbeat) }
                group.addTask {
                    while !Task.isCancelled {
                        do { _ = try await prune.store.runIfLeader("change-log-prune") { try await prune.prune() } } catch is CancellationError { return } catch {
                            logger.warning("change log prune failed; trying again in \(pruneInterval): \(error)")
                        }
                        try? await Task.sleep(for: pruneInterval)
                    }
                }
            }
        }
    }
}
