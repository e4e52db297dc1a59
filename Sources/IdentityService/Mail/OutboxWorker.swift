import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import Mail
import Synchronization

/// The outbox's delivery figures since the service started, for `identity.stats` and the
/// gateway's `/metrics`.
public final class OutboxMetrics: Sendable {
    /// A snapshot of the figures.
    public struct Snapshot: Sendable, Equatable {
        /// Mails waiting in the outbox (queued, due or not), as of the worker's last pass.
        public var queued: Int64 = 0
        /// Mails delivered.
        public var sent: Int64 = 0
        /// Failed attempts that were scheduled again.
        public var retried: Int64 = 0
        /// Mails given up on (a permanent error, or the attempts allowed used up).
        public var dead: Int64 = 0
        /// The sum over delivered mails of the time from enqueue to delivery, in milliseconds
        /// (divide by `sent` for the mean).
        public var latencyMillisecondsSum: Int64 = 0
        /// Delivered mails per bucket of that time (`IdentityStats.mailDeliveryBucketBounds`, then
        /// one for longer), not cumulative.
        public var latencyBuckets: [Int64] = Array(repeating: 0, count: IdentityStats.mailDeliveryBucketBounds.count + 1)

        /// Figures as given (zero for what is not).
        public init(
            queued: Int64 = 0, sent: Int64 = 0, retried: Int64 = 0, dead: Int64 = 0, latencyMillisecondsSum: Int64 = 0,
            latencyBuckets: [Int64]? = nil
        ) {
            if let latencyBuckets { self.latencyBuckets = latencyBuckets }
            self.queued = queued
            self.sent = sent
            self.retried = retried
            self.dead = dead
            self.latencyMillisecondsSum = latencyMillisecondsSum
        }
    }

    private let figures = Mutex(Snapshot())

    /// No figures yet.
    public init() {}

    /// The figures now.
    public var snapshot: Snapshot { figures.withLock { $0 } }

    func update(_ change: (inout Snapshot) -> Void) { figures.withLock { change(&$0) } }
}

/// Delivers the outbox through a `MailTransport` (issue 19): due rows are handed to the
/// transport one at a time; a delivered mail is marked sent with its body blanked; a transient
/// failure is tried again after a backoff (`Policy.delay`); a permanent failure, or the last
/// attempt allowed, marks it dead; so does a mail whose code expired before it could be sent
/// (`MailMessage.expiresAt`). One delivery may take `Policy.deliveryTimeout`. Sent and dead
/// rows are purged after `Policy.retention`, as is mail a `RetainingMailTransport` (the local
/// mailbox) holds.
///
/// At least once: a row is marked sent only after the transport returned, so a crash between
/// the two delivers it again after restart, with the same `Message-ID`. One worker per
/// database (the identity process owns it). Time comes from `clock`; `run()` wakes when a
/// mail is enqueued in this process (`OutboxSignal`) and at least every `Policy.pollInterval`.
public final class OutboxWorker: Sendable {
    /// How deliveries are retried and how long rows are kept.
    public struct Policy: Sendable {
        /// Attempts before a mail is dead (`GATEHOUSE_MAIL_MAX_ATTEMPTS`, 10).
        public var maxAttempts: Int
        /// The wait after the first failed attempt (30 s); it doubles with each failure...
        public var baseDelay: TimeInterval
        /// ...up to this (1 h).
        public var maxDelay: TimeInterval
        /// Each wait is shortened by a random fraction of up to this (0.2), so mails that
        /// failed together do not all come back at once.
        public var jitter: Double
        /// How long sent and dead rows are kept (7 days).
        public var retention: TimeInterval
        /// Rows read per look.
        public var batchSize: Int
        /// The longest the worker sleeps without being woken (5 s).
        public var pollInterval: Duration
        /// The longest one delivery may take (`GATEHOUSE_MAIL_DELIVERY_TIMEOUT`, 60 s): then its
        /// task is cancelled (the SMTP client closes its connection) and the attempt counts as a
        /// transient failure, so a hung or tarpitting relay cannot hold the worker.
        public var deliveryTimeout: Duration

        /// The documented defaults, or the values given.
        public init(
            maxAttempts: Int = 10, baseDelay: TimeInterval = 30, maxDelay: TimeInterval = 3600, jitter: Double = 0.2,
            retention: TimeInterval = 7 * 86_400, batchSize: Int = 50, pollInterval: Duration = .seconds(5),
            deliveryTimeout: Duration = .seconds(60)
        ) {
            self.maxAttempts = max(1, maxAttempts)
            self.baseDelay = baseDelay
            self.maxDelay = maxDelay
            self.jitter = min(max(0, jitter), 1)
            self.retention = retention
            self.batchSize = max(1, batchSize)
            self.pollInterval = pollInterval
            self.deliveryTimeout = deliveryTimeout
        }

        /// The wait after failed attempt number `attempt` (1 for the first): `baseDelay`
        /// doubled `attempt - 1` times, at most `maxDelay`, less `jitter * random` of it
        /// (`random` in 0..<1).
        public func delay(afterAttempt attempt: Int, random: Double) -> TimeInterval {
            let doubled = baseDelay * pow(2, Double(min(max(attempt - 1, 0), 40)))
            return min(doubled, maxDelay) * (1 - jitter * min(max(random, 0), 1))
        }
    }

    /// What one pass did.
    public struct PassCounts: Sendable, Equatable {
        /// Mails delivered.
        public var sent = 0
        /// Failed attempts scheduled again.
        public var retried = 0
        /// Mails marked dead.
        public var dead = 0
        /// Counts of a pass.
        public init(sent: Int = 0, retried: Int = 0, dead: Int = 0) {
            self.sent = sent
            self.retried = retried
            self.dead = dead
        }
    }

    /// Where the rows are.
    public let store: any IdentityStorage
    /// Where mail goes.
    public let transport: any MailTransport
    /// Where mail goes, in words for the log (`the local mailbox /data/mailbox`, `smtp.example.com:587`).
    public let destination: String
    /// The time rows are due, delivered and purged by.
    public let clock: WallClock
    /// Retries and retention.
    public let policy: Policy
    /// The figures `identity.stats` reports.
    public let metrics: OutboxMetrics
    let logger: Logger
    /// A number in 0..<1 for the jitter (tests fix it).
    let random: @Sendable () -> Double
    private let wake = Mutex(WakeState())
    private let lastPurge = Mutex<Date?>(nil)
    /// Rows the transport took whose `sent` mark failed (the database refused the write): they
    /// are not handed to the transport again, only marked, so a database that cannot write does
    /// not send the same mail at every pass.
    private let deliveredUnmarked = Mutex<Set<Int64>>([])

    private struct WakeState {
        var pending = false
        var sleeper: Task<Void, Never>?
    }

    /// A worker delivering `store`'s outbox through `transport`.
    public init(
        store: any IdentityStorage, transport: any MailTransport, destination: String, clock: WallClock = .system,
        policy: Policy = Policy(), metrics: OutboxMetrics = OutboxMetrics(), logger: Logger = Logger(label: "gatehouse.identity"),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.store = store
        self.transport = transport
        self.destination = destination
        self.clock = clock
        self.policy = policy
        self.metrics = metrics
        self.logger = logger
        self.random = random
    }

    /// Makes a sleeping `run()` look for due mail now (or right after its current pass).
    public func wakeUp() {
        wake.withLock { state in
            state.pending = true
            state.sleeper?.cancel()
        }
    }

    /// Passes until the task is cancelled: one at start, then one whenever woken, and at least
    /// every `policy.pollInterval`. A failed pass is logged and tried again at the next one.
    public func run() async {
        let key = OutboxSignal.shared.add { [weak self] in self?.wakeUp() }
        defer { OutboxSignal.shared.remove(key) }
        logger.info("mail delivery started: mail goes to \(destination)")
        while !Task.isCancelled {
            // Several instances on one store: one delivers at a time (a mail is never sent twice).
            do { _ = try await store.runIfLeader("outbox") { [self] in try await deliverDue() } } catch is CancellationError { return } catch {
                logger.warning("mail delivery pass failed; trying again shortly: \(error)")
            }
            let sleeper = Task<Void, Never> { [interval = policy.pollInterval] in _ = try? await Task.sleep(for: interval) }
            let skip = wake.withLock { state in
                if state.pending { return true }
                state.sleeper = sleeper
                return false
            }
            if skip { sleeper.cancel() }
            await withTaskCancellationHandler { await sleeper.value } onCancel: { sleeper.cancel() }
            wake.withLock { state in
                state.pending = false
                state.sleeper = nil
            }
        }
    }

    /// One pass: purges old sent and dead rows (at most once an hour), delivers every queued mail
    /// due now (in batches), and updates the queued gauge.
    @discardableResult
    public func deliverDue() async throws -> PassCounts {
        var counts = PassCounts()
        try await purgeIfDue()
        while true {
            let due = try await store.dueOutbox(at: clock.now, limit: policy.batchSize)
            for entry in due {
                try Task.checkCancellation()
                try await deliver(entry, counts: &counts)
            }
            if due.count < policy.batchSize { break }
        }
        let queued = try await store.outboxCount(state: "queued")
        metrics.update { $0.queued = Int64(queued) }
        return counts
    }

    private func deliver(_ entry: OutboxEntry, counts: inout PassCounts) async throws {
        let message = entry.message
        let attempt = entry.attempts + 1
        if let expiresAt = message.expiresAt, expiresAt <= clock.now, !deliveredUnmarked.withLock({ $0.contains(entry.id) }) {
            // Its code no longer works: sending it would only confuse the reader.
            try await store.recordOutboxAttempt(
                OutboxRules.failed(id: entry.id, message: message, attempts: entry.attempts, error: "expired", nextAttemptAt: nil))
            metrics.update { $0.dead += 1 }
            counts.dead += 1
            logger.notice("mail \(message.kind) to \(message.to) \(message.messageID) is dead: its code expired before it could be delivered")
            return
        }
        do {
            if !deliveredUnmarked.withLock({ $0.contains(entry.id) }) {
                try await Self.deliver(message, through: transport, within: policy.deliveryTimeout)
            }
        } catch is CancellationError {
            // Stopping: the mail stays queued as it was, and is delivered (again) after restart.
            throw CancellationError()
        } catch {
            let permanent: Bool, reason: String
            switch error {
            case MailDeliveryError.permanent(let why): (permanent, reason) = (true, why)
            case MailDeliveryError.transient(let why): (permanent, reason) = (false, why)
            default: (permanent, reason) = (false, "\(error)")
            }
            if permanent || attempt >= policy.maxAttempts {
                try await store.recordOutboxAttempt(
                    OutboxRules.failed(id: entry.id, message: message, attempts: attempt, error: reason, nextAttemptAt: nil))
                metrics.update { $0.dead += 1 }
                counts.dead += 1
                let why = permanent ? "a permanent error" : "\(attempt) attempts"
                logger.warning("mail \(message.kind) to \(message.to) \(message.messageID) is dead after \(why): \(reason)")
            } else {
                let wait = policy.delay(afterAttempt: attempt, random: random())
                try await store.recordOutboxAttempt(
                    OutboxRules.failed(
                        id: entry.id, message: message, attempts: attempt, error: reason, nextAttemptAt: clock.now.addingTimeInterval(wait)))
                metrics.update { $0.retried += 1 }
                counts.retried += 1
                logger.notice("mail \(message.kind) to \(message.to) not delivered (attempt \(attempt)); trying again in \(Int(wait)) s: \(reason)")
            }
            return
        }
        let now = clock.now
        do {
            try await store.recordOutboxAttempt(OutboxRules.sent(id: entry.id, message: message, attempts: attempt, at: now))
        } catch {
            deliveredUnmarked.withLock { _ = $0.insert(entry.id) }
            throw error
        }
        deliveredUnmarked.withLock { _ = $0.remove(entry.id) }
        let latency = max(0, now.millisecondsSince1970 - entry.createdAt.millisecondsSince1970)
        let bucket = IdentityStats.mailDeliveryBucketBounds.firstIndex { Double(latency) / 1000 <= $0 }
            ?? IdentityStats.mailDeliveryBucketBounds.count
        metrics.update {
            $0.sent += 1
            $0.latencyMillisecondsSum += latency
            $0.latencyBuckets[bucket] += 1
        }
        counts.sent += 1
        logger.info("mail \(message.kind) to \(message.to) delivered to \(destination) \(message.messageID)")
    }

    /// `transport.deliver(message)`, cancelled after `limit`: then `MailDeliveryError.transient`
    /// once the transport returned (the SMTP client closes its connection when cancelled; a
    /// transport that ignores cancellation holds the worker until it returns), unless it
    /// delivered after all.
    /// A cancellation of the caller's task is a `CancellationError`, as before.
    static func deliver(_ message: MailMessage, through transport: any MailTransport, within limit: Duration) async throws {
        let finished = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await transport.deliver(message)
                return true
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            if first { return true }
            // The deadline passed and the delivery is cancelled: it may still have finished
            // meanwhile (the relay took the mail just then), which counts as delivered.
            return (try? await group.next()) == true
        }
        guard finished else {
            throw MailDeliveryError.transient(
                "the delivery did not finish within \(limit.formattedSeconds) (GATEHOUSE_MAIL_DELIVERY_TIMEOUT); the connection was closed")
        }
    }

    private func purgeIfDue() async throws {
        let now = clock.now
        let due = lastPurge.withLock { last in
            guard last.map({ now.timeIntervalSince($0) >= 3600 || now < $0 }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        let purged = try await store.purgeOutbox(before: now.addingTimeInterval(-policy.retention))
        // One-time codes (reset, verification, change, revert) expired or used a day ago: nothing can use them any more.
        _ = try await store.purgeCodes(before: now.addingTimeInterval(-86_400))
        if purged > 0 { logger.info("purged \(purged) sent or dead mails older than \(Int(policy.retention / 86_400)) days from the outbox") }
        if let mailbox = transport as? any RetainingMailTransport {
            do {
                let removed = try mailbox.purge(deliveredBefore: now.addingTimeInterval(-policy.retention))
                if removed > 0 { logger.info("purged \(removed) mails older than \(Int(policy.retention / 86_400)) days from \(destination)") }
            } catch {
                logger.warning("could not purge old mail from \(destination): \(error)")
            }
        }
    }
}

extension Duration {
    /// `60 s`, `1.5 s`: whole seconds without a fraction.
    var formattedSeconds: String {
        let seconds = Double(components.seconds) + Double(components.attoseconds) / 1e18
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }
}

extension IdentityStats {
    /// These stats with the outbox's figures.
    func withMail(_ mail: OutboxMetrics.Snapshot) -> IdentityStats {
        var stats = self
        stats.mailQueued = mail.queued
        stats.mailSent = mail.sent
        stats.mailRetried = mail.retried
        stats.mailDead = mail.dead
        stats.mailDeliveryLatencyMsSum = mail.latencyMillisecondsSum
        stats.mailDeliverySecondsBuckets = mail.latencyBuckets
        return stats
    }
}
