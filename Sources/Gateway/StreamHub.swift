import Foundation
import GatehouseContracts
import GatehouseSupport
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization

/// The metrics of `GET /v1/me/events`, in the gateway's registry.
final class StreamMetrics: Sendable {
    /// `gatehouse_event_streams`: streams open now.
    let open: Prometheus.Gauge
    /// `gatehouse_event_stream_events_total`: events queued on streams (comments not counted).
    let eventsWritten: Prometheus.Counter
    /// `gatehouse_change_feed_gaps_total`: gaps found in `user.changed` (caught up or not).
    let gaps: Prometheus.Counter
    private let closed: [StreamCloseReason: Prometheus.Counter]

    init(registry: PrometheusCollectorRegistry) {
        open = registry.makeGauge(descriptor: .init(metricName: "gatehouse_event_streams", unitName: "", helpText: "Open GET /v1/me/events streams."))
        eventsWritten = registry.makeCounter(
            descriptor: .init(
                metricName: "gatehouse_event_stream_events_total", unitName: "",
                helpText: "Events written to GET /v1/me/events streams (heartbeat comments not counted)."))
        gaps = registry.makeCounter(
            descriptor: .init(
                metricName: "gatehouse_change_feed_gaps_total", unitName: "",
                helpText: "Gaps found in the identity service's user.changed feed (a seq or heartbeat past the last event), caught up with identity.listChanges."))
        var closed: [StreamCloseReason: Prometheus.Counter] = [:]
        for reason in StreamCloseReason.allCases {
            closed[reason] = registry.makeCounter(
                descriptor: .init(
                    metricName: "gatehouse_event_streams_closed_total", unitName: "",
                    helpText: "GET /v1/me/events streams ended, by reason (the closed event's reason; disconnected, slow_reader: no event)."),
                labels: [("reason", reason.rawValue)])
        }
        self.closed = closed
    }

    func closed(_ reason: StreamCloseReason) { closed[reason]?.increment() }
}

/// The open `GET /v1/me/events` streams of this gateway, by user: the caps, the delivery of
/// changes (`ChangeFeedService`) and revocations (`RevocationFeedService`) to them, and one
/// ticker for all of them (token expiry on the injected wall clock, heartbeat comments, a
/// re-check of each session against the revocation list). No task or timer per stream.
final class StreamHub: Service, Sendable {
    let settings: StreamSettings
    let metrics: StreamMetrics
    private let clock: WallClock
    private let revoked: RevocationList
    private let logger: Logger
    private let registry = Mutex(Registry())
    private let delivered = Atomic<UInt64>(0)
    private let feedReady = Atomic<Bool>(false)

    private struct Registry {
        var byUser: [String: [EventStream]] = [:]
        var count = 0
        var nextID: UInt64 = 0
        var shuttingDown = false
    }

    init(settings: StreamSettings, metrics: StreamMetrics, clock: WallClock, revoked: RevocationList, logger: Logger) {
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.revoked = revoked
        self.logger = logger
    }

    /// The seq of the last change delivered (tests wait for it).
    var lastDelivered: UInt64 { delivered.load(ordering: .acquiring) }

    /// Streams open now.
    var count: Int { registry.withLock { $0.count } }

    /// Registers a new stream of `userID` (it keeps the user's live changes until `start`).
    /// Refused with 503 `too_many_streams` when the gateway holds `maxStreams`. The per-user cap
    /// is applied once the new stream has started (`admitted`), so a connect that fails after
    /// this closes none of the user's streams.
    func open(userID: String, sessionID: String, expiresAt: Date) throws -> EventStream {
        let stream: EventStream? = registry.withLock { r in
            guard !r.shuttingDown, r.count < settings.maxStreams else { return nil }
            r.nextID += 1
            let stream = EventStream(
                id: r.nextID, userID: userID, sessionID: sessionID, expiresAt: expiresAt, retryMs: settings.retryMs,
                limit: settings.bufferBytes, metrics: metrics)
            r.byUser[userID, default: []].append(stream)
            r.count += 1
            return stream
        }
        guard let stream else {
            throw GatewayError(.tooManyStreams, detail: ErrorTable.entry(.tooManyStreams).detail ?? "Too many event streams.")
        }
        metrics.open.increment()
        return stream
    }

    /// `stream` has started: a user past `maxPerUser` loses its oldest other streams (`closed`,
    /// `too_many_streams`).
    func admitted(_ stream: EventStream) {
        let evicted: [EventStream] = registry.withLock { r in
            guard let streams = r.byUser[stream.userID], streams.count > settings.maxPerUser else { return [] }
            return Array(streams.filter { $0 !== stream }.prefix(streams.count - settings.maxPerUser))
        }
        for old in evicted { close(old, .tooManyStreams) }
    }

    /// Removes `stream` (idempotent), counting why it ended.
    func remove(_ stream: EventStream, _ fallback: StreamCloseReason = .disconnected) {
        let removed = registry.withLock { r in
            guard var streams = r.byUser[stream.userID], let index = streams.firstIndex(where: { $0 === stream }) else { return false }
            streams.remove(at: index)
            r.byUser[stream.userID] = streams.isEmpty ? nil : streams
            r.count -= 1
            return true
        }
        guard removed else { return }
        metrics.open.decrement()
        metrics.closed(stream.endReason ?? fallback)
    }

    /// Ends `stream` with a `closed` event and removes it.
    func close(_ stream: EventStream, _ reason: StreamCloseReason) {
        stream.close(reason)
        remove(stream)
    }

    /// Aborts `stream` (no event; its connection is closed) and removes it.
    func abort(_ stream: EventStream, _ reason: StreamCloseReason) {
        stream.abort(reason)
        remove(stream)
    }

    /// Delivers a change of the change feed to its user's streams.
    func deliver(_ change: UserChange) {
        delivered.store(change.seq, ordering: .releasing)
        for stream in streams(of: change.userID) where stream.offer(change) != nil { remove(stream) }
    }

    /// A session was revoked: its streams end with the `closed` reason of the revocation's reason.
    func revoked(sessionID: String, userID: String, reason: String) {
        let candidates = userID.isEmpty ? all() : streams(of: userID)
        for stream in candidates where stream.sessionID == sessionID { close(stream, StreamCloseReason(revocation: reason)) }
    }

    /// Ends the streams of `userIDs` with `closed` `reason`.
    func close(users userIDs: [String], _ reason: StreamCloseReason) {
        for userID in userIDs {
            for stream in streams(of: userID) { close(stream, reason) }
        }
    }

    /// Ends every stream with `closed` `reason`.
    func closeAll(_ reason: StreamCloseReason) {
        for stream in all() { close(stream, reason) }
    }

    /// The change feed has read the log's head: from now on it delivers every change after it,
    /// so streams may open (`waitForFeed`).
    func feedStarted() { feedReady.store(true, ordering: .releasing) }

    /// Waits until the change feed has started (a moment at the gateway's start), at most
    /// `timeout`; 503 `service_unavailable` after it (the identity service does not answer).
    func waitForFeed(timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while !feedReady.load(ordering: .acquiring) {
            guard ContinuousClock.now < deadline else { throw GatewayError.serviceUnavailable }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Whether no stream is open (catching up on the change feed is then pointless).
    var isEmpty: Bool { count == 0 }

    /// Expiry (and, with `heartbeat`, keep-alive comments and the revocation re-check) of every stream at `now`.
    func tick(now: Date, heartbeat: Bool) {
        for stream in all() {
            if heartbeat, revoked.contains(stream.sessionID, now: now) {
                close(stream, .sessionRevoked)
                continue
            }
            if stream.checkExpiry(now: now, notice: settings.expiryNotice) != nil {
                remove(stream)
                continue
            }
            if heartbeat, stream.keepAlive() != nil { remove(stream) }
        }
    }

    /// The ticker, until graceful shutdown; then every stream gets `closed` (`shutting_down`)
    /// and new ones are refused.
    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var lastBeat = ContinuousClock.now
            while !Task.isCancelled {
                try await Task.sleep(for: self.settings.tick)
                let beat = ContinuousClock.now - lastBeat >= self.settings.heartbeat
                if beat { lastBeat = .now }
                self.tick(now: self.clock.now, heartbeat: beat)
            }
        }
        shutDown()
    }

    /// Refuses new streams and closes the open ones (`shutting_down`).
    func shutDown() {
        registry.withLock { $0.shuttingDown = true }
        closeAll(.shuttingDown)
    }

    private func streams(of userID: String) -> [EventStream] { registry.withLock { $0.byUser[userID] ?? [] } }

    private func all() -> [EventStream] { registry.withLock { $0.byUser.values.flatMap { $0 } } }
}
