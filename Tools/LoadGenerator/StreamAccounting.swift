import Foundation
import Histogram

/// The books of a `stream` run: which changes were made to which user, which `change` events
/// each user's stream delivered, and how late. Events may arrive before the answer to their
/// PATCH does, so nothing is matched until `tally()`.
struct StreamAccounting {
    /// Values of `settings.n` set by a successful PATCH, by user.
    private(set) var expected: [Int: Set<Int>] = [:]
    /// Values of `settings.n` delivered by `change` events, by user.
    private(set) var delivered: [Int: Set<Int>] = [:]
    /// Event ids seen, by user (a second event with a seen id is a duplicate).
    private var ids: [Int: Set<String>] = [:]
    private(set) var expectedCount = 0
    private(set) var deliveredCount = 0
    private(set) var duplicates = 0
    /// `change` events whose data could not be read (no `settings.n` or no `occurredAt`).
    private(set) var unreadable = 0
    private(set) var latency: Histogram<UInt64>

    init() {
        latency = Histogram(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
    }

    /// A PATCH setting `settings.n = value` for `user` succeeded.
    mutating func patched(user: Int, value: Int) {
        if expected[user, default: []].insert(value).inserted { expectedCount += 1 }
    }

    /// A `change` event with `id` reached `user`'s stream carrying `settings.n = value` (nil:
    /// unreadable), `latencyMicros` after its `occurredAt` (nil: unknown).
    mutating func received(user: Int, id: String?, value: Int?, latencyMicros: Int64?) {
        if let id, !ids[user, default: []].insert(id).inserted {
            duplicates += 1
            return
        }
        guard let value else {
            unreadable += 1
            return
        }
        if !delivered[user, default: []].insert(value).inserted {
            duplicates += 1
            return
        }
        deliveredCount += 1
        if let latencyMicros { latency.record(UInt64(min(max(latencyMicros, 1), 600_000_000))) }
    }

    /// True once as many distinct changes were delivered as were made (the drain may stop).
    var caughtUp: Bool { deliveredCount >= expectedCount }

    /// The counts: made, delivered and matching, lost (made, never delivered), unexpected
    /// (delivered, never made by this run), duplicates.
    func tally() -> StreamEventTally {
        var matched = 0
        var lost = 0
        for (user, values) in expected {
            let got = delivered[user] ?? []
            let hits = values.intersection(got).count
            matched += hits
            lost += values.count - hits
        }
        return StreamEventTally(
            expected: expectedCount, received: deliveredCount, matched: matched, lost: lost, unexpected: deliveredCount - matched,
            duplicates: duplicates, unreadable: unreadable)
    }
}

/// What the streams delivered against what the run changed.
public struct StreamEventTally: Codable, Sendable, Equatable {
    /// Changes made (PATCH answered 200).
    public var expected: Int
    /// Distinct changes delivered by `change` events.
    public var received: Int
    /// Delivered changes that the run made.
    public var matched: Int
    /// Changes made and never delivered (must be 0).
    public var lost: Int
    /// Changes delivered that the run did not make (must be 0).
    public var unexpected: Int
    /// Events delivered a second time (same id, or the same change again; must be 0).
    public var duplicates: Int
    /// `change` events whose data could not be read.
    public var unreadable: Int
}

/// The result of a `stream` run; `--json` prints exactly this.
public struct StreamLoadResult: Codable, Sendable, LoadReport {
    /// The target's base URL.
    public var url: String
    /// Streams asked for (one anonymous user each).
    public var streams: Int
    /// Streams that opened (answered 200 and delivered their snapshot).
    public var opened: Int
    /// Streams that did not open, by status code or failure kind.
    public var openFailures: [String: Int]
    /// Seconds to create the users (not part of any figure).
    public var setupSeconds: Double
    /// Seconds from the first connect until every stream delivered its snapshot (or failed).
    public var openSeconds: Double
    /// The change rate asked for, per second.
    public var rate: Double
    /// Seconds of changes asked for.
    public var durationSeconds: Double
    /// Changes sent, answered 200, failed (by status or kind).
    public var changesSent: Int
    /// Changes answered 200.
    public var changesOK: Int
    /// Changes that failed, by status code or failure kind.
    public var changeFailures: [String: Int]
    /// Seconds the changes took (first sent to last answered), and the rate achieved.
    public var changeSeconds: Double
    /// Changes answered 200 per second of `changeSeconds`.
    public var achievedRate: Double
    /// Latency of the PATCH requests.
    public var changeLatencyMs: LatencySummary
    /// Seconds waited after the last change for the last events.
    public var drainSeconds: Double
    /// Delivered against made.
    public var events: StreamEventTally
    /// Delivery latency: the client's clock at the event minus its `occurredAt` (commit time, ms resolution).
    public var deliveryLatencyMs: LatencySummary
    /// Heartbeat comments received over all streams.
    public var heartbeats: Int
    /// `closed` events, by reason (none is expected during a run).
    public var closedByServer: [String: Int]
    /// Streams that ended without a `closed` event before the run closed them.
    public var droppedStreams: Int
    /// The gateway's RSS before the streams opened, in KiB (with `--gateway-pid`).
    public var gatewayRSSBeforeKiB: Int?
    /// The gateway's RSS with every stream open, in KiB.
    public var gatewayRSSOpenKiB: Int?
    /// The gateway's RSS at the end of the change phase, in KiB.
    public var gatewayRSSAfterKiB: Int?
    /// (RSS open − RSS before) / streams opened, in KiB.
    public var gatewayKiBPerStream: Double?

    /// Whether the run found a problem: a stream that did not open, a failed change, or an event
    /// lost, unexpected, duplicated or unreadable (with `--fail-on-error` the CLI then exits 1).
    public var hadErrors: Bool {
        opened < streams || changesOK < changesSent || events.lost > 0 || events.unexpected > 0 || events.duplicates > 0
            || events.unreadable > 0 || droppedStreams > 0 || !closedByServer.isEmpty
    }

    /// The human-readable table.
    public func textReport() -> String {
        func fmt(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }
        func counts(_ map: [String: Int]) -> String { map.isEmpty ? "none" : map.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ") }
        var lines: [String] = []
        lines.append("scenario      stream")
        lines.append("target        \(url)")
        lines.append("setup         \(streams) anonymous users in \(fmt(setupSeconds)) s (not recorded)")
        lines.append("streams       \(opened) of \(streams) open in \(fmt(openSeconds)) s; failed: \(counts(openFailures))")
        lines.append("changes       \(changesOK) of \(changesSent) ok in \(fmt(changeSeconds)) s = \(fmt(achievedRate, 1))/s (asked \(fmt(rate, 1))/s for \(fmt(durationSeconds, 0)) s); failed: \(counts(changeFailures))")
        lines.append("events        expected \(events.expected), received \(events.received), lost \(events.lost), duplicates \(events.duplicates), unexpected \(events.unexpected), unreadable \(events.unreadable)")
        lines.append("drain         \(fmt(drainSeconds)) s after the last change")
        lines.append("heartbeats    \(heartbeats); closed by the server: \(counts(closedByServer)); dropped: \(droppedStreams)")
        if let before = gatewayRSSBeforeKiB {
            var memory = "gateway RSS \(before) KiB before"
            if let open = gatewayRSSOpenKiB { memory += ", \(open) KiB with the streams open" }
            if let after = gatewayRSSAfterKiB { memory += ", \(after) KiB after the changes" }
            if let perStream = gatewayKiBPerStream { memory += "; \(fmt(perStream, 1)) KiB per stream" }
            lines.append("memory        \(memory)")
        }
        lines.append("")
        lines.append(LoadResult.latencyHeader)
        lines.append(LoadResult.latencyRow("delivery", deliveryLatencyMs))
        lines.append(LoadResult.latencyRow("PATCH /v1/me", changeLatencyMs))
        return lines.joined(separator: "\n")
    }
}
