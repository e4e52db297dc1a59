import Foundation
import GatehouseContracts
import GatehouseSupport
import Logging
import ServiceLifecycle

/// Keeps the gateway's `RevocationState` complete, until graceful shutdown:
///
/// - **feed**: subscribes to the token service's `session.revoked` and `token.heartbeat`, applies
///   every notice, and resubscribes (after a second) when a stream ends; each subscription
///   marks the state as needing a snapshot.
/// - **loader**: loads `token.listRevocations` whenever the state asks (at start, after a
///   subscription, a seq gap or an epoch change), retrying with a growing pause (up to a
///   second) while the token service does not answer.
/// - **watchdog**: when the feed has said nothing for three heartbeat intervals (a cut or
///   misconfigured event link looks just like a quiet one), reloads the snapshot every three
///   intervals until it speaks again, so the gateway still learns of revocations by polling.
struct RevocationFeedService: Service {
    let subscribe: @Sendable () -> AsyncStream<RevocationNotice>
    let load: @Sendable () async throws -> RevocationSnapshot
    let state: RevocationState
    let heartbeat: Duration
    let clock: WallClock
    let logger: Logger
    /// Told of each `session.revoked` event (the event streams of the session end).
    var onRevoked: @Sendable (SessionRevokedEvent) -> Void = { _ in }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await feed() }
                group.addTask { await loader() }
                group.addTask { await watchdog() }
            }
        }
        state.finish()
    }

    func feed() async {
        while !Task.isCancelled {
            let stream = subscribe()
            state.subscribed()
            for await notice in stream {
                state.apply(notice, now: clock.now)
                if case .revoked(let event) = notice { onRevoked(event) }
            }
            if Task.isCancelled { break }
            logger.debug("revocation feed ended; resubscribing")
            try? await Task.sleep(for: .seconds(1))
        }
    }

    func loader() async {
        var failing = false
        for await request in state.reloadRequests {
            if Task.isCancelled { return }
            if request == .ifBehind, state.isCurrent { continue }
            var pause = Duration.milliseconds(50)
            while !Task.isCancelled {
                let mark = state.loadStarting()
                do {
                    let snapshot = try await load()
                    if failing { logger.notice("revocation state loaded again (\(snapshot.sessions.count) recent revocations)") }
                    failing = false
                    // Still behind (a newer position was announced meanwhile): the next request
                    // reloads, after a short pause so a burst of events costs a few loads, not one each.
                    if !state.install(snapshot, mark: mark, now: clock.now) { try? await Task.sleep(for: .milliseconds(20)) }
                    break
                } catch {
                    state.loadFailed()
                    if !failing { logger.warning("cannot load the revocation state from the token service; retrying: \(error)") }
                    failing = true
                    try? await Task.sleep(for: pause)
                    pause = min(pause * 2, .seconds(1))
                }
            }
        }
    }

    func watchdog() async {
        let limit = heartbeat * 3
        var silent = false
        while !Task.isCancelled {
            try? await Task.sleep(for: limit)
            if state.silence >= limit {
                if !silent { logger.warning("no revocation event or heartbeat for \(limit); polling token.listRevocations until the feed is back") }
                silent = true
                state.requestReload(.always)
            } else {
                silent = false
            }
        }
    }
}
