import Foundation
import GatehouseSupport
import Logging
import ServiceLifecycle

/// Consumes the token service's revoked-session feed into the `RevocationList`, resubscribing (after a
/// second) whenever a stream ends, until graceful shutdown.
struct RevocationFeedService: Service {
    let subscribe: @Sendable () -> AsyncStream<String>
    let list: RevocationList
    let clock: WallClock
    let logger: Logger

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            for await sid in subscribe().cancelOnGracefulShutdown() {
                list.insert(sid, now: clock.now)
            }
            if Task.isCancelled || Task.isShuttingDownGracefully { break }
            logger.debug("revocation feed ended; resubscribing")
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
