import Foundation
import GatehouseContracts
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization

/// One message of the identity service's change feed.
public enum ChangeNotice: Sendable, Hashable {
    /// A `user.changed` event.
    case changed(UserChange)
    /// An `identity.heartbeat`: the newest published position.
    case heartbeat(ChangeFeedHeartbeat)
}

/// Where the gateway is in the change feed: the `seq` through which every change was delivered
/// to the streams. Pure logic (`ChangeFeedService` does the calls).
struct ChangeFeedPosition: Sendable, Equatable {
    /// nil until the service read the log's head at start.
    var seq: UInt64?
    /// The newest seq the feed itself announced (a change or a heartbeat). A catch-up reads the
    /// log past it (changes committed but not published yet), so only a heartbeat below this,
    /// not below `seq`, means the feed went back.
    var announced: UInt64 = 0

    /// What to do with a notice.
    enum Step: Equatable {
        /// Deliver the change (and move to its seq).
        case deliver
        /// Already delivered (or older): drop it.
        case drop
        /// Changes are missing up to `through` (`listChanges` after `seq`, then deliver the notice's change, if any).
        case catchUp(through: UInt64)
        /// A heartbeat below what the feed announced: either the log went back (a restored
        /// database) or, with several identity instances publishing, that instance has not yet
        /// published what another did. The log's head tells which (`wentBack(to:head:)`).
        case checkBehind(beat: UInt64)
        /// The feed went back (a restored log): the position is reset and open streams must resume.
        case reset
    }

    /// The step for `notice`; moves the position for `deliver` and `reset`, and on the first notice.
    mutating func step(_ notice: ChangeNotice) -> Step {
        switch notice {
        case .changed(let change):
            announced = max(announced, change.seq)
            guard let seq else {
                self.seq = change.seq
                return .deliver
            }
            if change.seq <= seq { return .drop }
            if change.seq == seq + 1 {
                self.seq = change.seq
                return .deliver
            }
            return .catchUp(through: change.seq - 1)
        case .heartbeat(let beat):
            guard let seq else {
                self.seq = beat.seq
                announced = beat.seq
                return .drop
            }
            if beat.seq < announced { return .checkBehind(beat: beat.seq) }
            announced = beat.seq
            return beat.seq > seq ? .catchUp(through: beat.seq) : .drop
        }
    }

    /// After `checkBehind(beat:)`: with the log's `head` below what the feed announced, the log
    /// went back (`reset`, the position moved to the beat); otherwise an instance was behind
    /// another (`drop`).
    mutating func wentBack(to beat: UInt64, head: UInt64) -> Step {
        guard head < announced else { return .drop }
        seq = beat
        announced = beat
        return .reset
    }
}

/// Keeps the open streams fed from the identity service's change feed, until graceful shutdown:
/// subscribes to `user.changed` and `identity.heartbeat` (resubscribing a second after a
/// subscription ends), delivers each change to the `StreamHub` in `seq` order once, and on a
/// gap (a seq past the next, or a heartbeat past the position) lists the missing changes with
/// `identity.listChanges` first. When they cannot be listed (the identity service does not
/// answer, or they were pruned) or the feed went back, the open streams end with `closed`
/// (`resync`, resumable): they resume from the log with `Last-Event-ID`, so nothing is lost.
///
/// A feed silent for three heartbeats (a cut or misconfigured event link looks like a quiet
/// one) is polled: while streams are open, `identity.listChanges` after the position every three
/// heartbeats until it speaks again.
struct ChangeFeedService: Service {
    let subscribe: @Sendable () -> AsyncStream<ChangeNotice>
    let list: @Sendable (_ afterSeq: UInt64) async throws -> ListChangesResponse
    let hub: StreamHub
    let heartbeat: Duration
    let logger: Logger

    private enum Input: Sendable {
        case notice(ChangeNotice)
        case poll
    }

    func run() async throws {
        await cancelWhenGracefulShutdown { await feed() }
    }

    func feed() async {
        // Bounded: what falls out shows up as a gap, caught up from the log.
        let (inputs, input) = AsyncStream.makeStream(of: Input.self, bufferingPolicy: .bufferingNewest(10_000))
        let lastHeard = LastHeard()
        await withDiscardingTaskGroup { group in
            group.addTask {
                while !Task.isCancelled {
                    for await notice in subscribe() {
                        lastHeard.instant.withLock { $0 = .now }
                        input.yield(.notice(notice))
                    }
                    if Task.isCancelled { break }
                    logger.debug("change feed ended; resubscribing")
                    try? await Task.sleep(for: .seconds(1))
                }
                input.finish()
            }
            group.addTask {
                let limit = heartbeat * 3
                var silent = false
                while !Task.isCancelled {
                    try? await Task.sleep(for: limit)
                    guard ContinuousClock.now - lastHeard.instant.withLock({ $0 }) >= limit else {
                        silent = false
                        continue
                    }
                    if !silent { logger.warning("no user change or heartbeat for \(limit); polling identity.listChanges until the feed is back") }
                    silent = true
                    input.yield(.poll)
                }
            }
            group.addTask {
                var position = ChangeFeedPosition()
                await start(&position)
                for await next in inputs {
                    if Task.isCancelled { break }
                    switch next {
                    case .notice(let notice): await handle(notice, &position)
                    case .poll: await poll(&position)
                    }
                }
            }
        }
    }

    /// Reads the log's head (`identity.listChanges` past every seq), retrying until the identity
    /// service answers, and lets streams open from then on: every change after the head reaches
    /// the streams (a gap is caught up from the log), so a stream, whose own read comes later,
    /// misses none, even those published before this gateway's subscription was connected.
    func start(_ position: inout ChangeFeedPosition) async {
        var pause = Duration.milliseconds(50)
        var warned = false
        while !Task.isCancelled {
            do {
                let page = try await list(UInt64(Int64.max))
                position.seq = page.head
                position.announced = page.head
                hub.feedStarted()
                if warned { logger.notice("the change log answers again; event streams can open") }
                return
            } catch {
                if !warned { logger.warning("cannot read the change log's head (identity.listChanges: \(error)); event streams wait for it") }
                warned = true
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(2))
            }
        }
    }

    /// The feed is silent: reads the changes after the position from the log, every page, while
    /// streams are open; with none open, moves to the head.
    func poll(_ position: inout ChangeFeedPosition) async {
        guard let seq = position.seq else { return }
        guard !hub.isEmpty else {
            if let page = try? await list(UInt64(Int64.max)), page.head > seq { position.seq = page.head }
            return
        }
        guard let head = try? await list(UInt64(Int64.max)).head, head > seq else { return }
        await catchUp(&position, through: head)
    }

    func handle(_ notice: ChangeNotice, _ position: inout ChangeFeedPosition) async {
        var step = position.step(notice)
        if case .checkBehind(let beat) = step {
            // One read of the head: a restored log is behind what was announced, a lagging
            // instance's log is not. Unanswered: taken as lag (the next heartbeat asks again).
            guard let head = try? await list(UInt64(Int64.max)).head else { return }
            step = position.wentBack(to: beat, head: head)
        }
        switch step {
        case .checkBehind:
            break
        case .deliver:
            if case .changed(let change) = notice { hub.deliver(change) }
        case .drop:
            break
        case .reset:
            logger.warning("the change feed went back to seq \(position.seq ?? 0); open event streams resume from the log")
            hub.closeAll(.resync)
        case .catchUp(let through):
            hub.metrics.gaps.increment()
            await catchUp(&position, through: through)
            if case .changed(let change) = notice, let seq = position.seq, change.seq > seq {
                position.seq = change.seq
                hub.deliver(change)
            }
        }
    }

    /// Lists and delivers the changes after the position up to `through` (more may come).
    private func catchUp(_ position: inout ChangeFeedPosition, through: UInt64) async {
        guard !hub.isEmpty else {
            position.seq = max(position.seq ?? 0, through)
            return
        }
        var pause = Duration.milliseconds(100)
        var failures = 0
        while let seq = position.seq, seq < through, !Task.isCancelled {
            do {
                let page = try await list(seq)
                if page.truncated {
                    logger.warning("changes after seq \(seq) were pruned before this gateway caught up; open event streams resume from the log")
                    hub.closeAll(.resync)
                    position.seq = max(through, page.head)
                    return
                }
                // Users whose missed changes the per-user cap pruned resume from a snapshot.
                hub.close(users: page.resyncUserIDs, .resync)
                for change in page.changes where change.seq > position.seq ?? 0 {
                    position.seq = change.seq
                    hub.deliver(change)
                }
                if page.changes.isEmpty || (position.seq ?? 0) >= page.head {
                    position.seq = max(position.seq ?? 0, through)
                    return
                }
            } catch {
                failures += 1
                if failures >= 3 {
                    logger.warning("cannot list the missed changes (identity.listChanges: \(error)); open event streams resume from the log")
                    hub.closeAll(.resync)
                    position.seq = through
                    return
                }
                try? await Task.sleep(for: pause)
                pause *= 2
            }
        }
    }
}

/// When the change feed last said something.
private final class LastHeard: Sendable {
    let instant = Mutex(ContinuousClock.now)
}
