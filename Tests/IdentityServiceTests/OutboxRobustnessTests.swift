import Dispatch
import Foundation
import IdentityPorts
import GatehouseSupport
import GatehouseTestSupport
import IdentityService
import Mail
import Synchronization
import Testing

/// A transport that never finishes on its own (a hung relay) but stops when its task is
/// cancelled, as the SMTP client does.
final class HangingTransport: MailTransport {
    private let calls = Mutex(0)
    var attempts: Int { calls.withLock { $0 } }

    func deliver(_ message: MailMessage) async throws {
        calls.withLock { $0 += 1 }
        try await Task.sleep(for: .seconds(3600))
    }
}

/// A transport that ignores cancellation and takes the mail after `delay` (the relay accepted
/// it just as the deadline passed).
struct LateTransport: MailTransport {
    let delay: Double
    func deliver(_ message: MailMessage) async throws {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) { done.resume() }
        }
    }
}

/// Delivery robustness (issue 19 part 2, F4): the per-delivery deadline, mail whose code
/// expired (over SQLite and PostgreSQL), and the local mailbox's purge.
@Suite("Outbox delivery robustness", .timeLimit(.minutes(1)))
struct OutboxRobustnessTests {
    let directory: TemporaryDirectory
    let clock = ManualClock()

    init() async throws {
        directory = try TemporaryDirectory(prefix: "outbox-robust")
    }

    /// A migrated store of `kind` (SQLite or PostgreSQL), and what removes it.
    func makeStore(_ kind: StoreKind) async throws -> (any IdentityStorage, @Sendable () -> Void) {
        let (store, cleanup) = try await kind.make()
        return (identityStorage(store), cleanup)
    }

    func mail(expiresAt: Date? = nil) -> MailMessage {
        MailMessage(
            kind: "password_reset", from: "Gatehouse <no-reply@example.com>", to: "ada@example.com", subject: "Reset",
            text: "code-1", date: clock.now, expiresAt: expiresAt)
    }

    func worker(
        _ store: any IdentityStorage, _ transport: any MailTransport, deliveryTimeout: Duration = .seconds(60), retention: TimeInterval = 7 * 86_400
    ) -> OutboxWorker {
        OutboxWorker(
            store: store, transport: transport, destination: "a test transport", clock: clock.wallClock,
            policy: .init(retention: retention, deliveryTimeout: deliveryTimeout), random: { 0 })
    }

    @Test("a delivery that does not finish within the delivery timeout is cancelled and retried later; the pass goes on", arguments: StoreKind.kept)
    func deliveryTimeout(_ kind: StoreKind) async throws {
        defer { directory.remove() }
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        try await store.enqueueMail(mail(), at: clock.now)
        let transport = HangingTransport()
        let started = ContinuousClock.now
        let counts = try await worker(store, transport, deliveryTimeout: .milliseconds(300)).deliverDue()
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(counts == .init(retried: 1))
        #expect(transport.attempts == 1)
        let row = try #require(try await store.outboxEntries().first)
        #expect(row.state == "queued")
        #expect(row.attempts == 1)
        #expect(row.lastError?.contains("GATEHOUSE_MAIL_DELIVERY_TIMEOUT") == true, "\(row.lastError ?? "nil")")
        #expect(row.nextAttemptAt == clock.now.addingTimeInterval(30))
    }

    @Test("a delivery that finishes after the deadline passed (the transport ignored the cancellation) counts as delivered", arguments: StoreKind.kept)
    func lateDeliveryCounts(_ kind: StoreKind) async throws {
        defer { directory.remove() }
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        try await store.enqueueMail(mail(), at: clock.now)
        #expect(try await worker(store, LateTransport(delay: 0.5), deliveryTimeout: .milliseconds(50)).deliverDue() == .init(sent: 1))
        #expect(try await store.outboxEntries().first?.state == "sent")
    }

    @Test("the worker's own cancellation during a hung delivery leaves the mail queued as it was", arguments: StoreKind.kept)
    func cancelledDuringHungDelivery(_ kind: StoreKind) async throws {
        defer { directory.remove() }
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        try await store.enqueueMail(mail(), at: clock.now)
        let transport = HangingTransport()
        let outbox = worker(store, transport)
        let pass = Task { try await outbox.deliverDue() }
        try await waitUntil("the delivery to start") { transport.attempts == 1 }
        pass.cancel()
        await #expect(throws: CancellationError.self) { try await pass.value }
        let row = try #require(try await store.outboxEntries().first)
        #expect(row.state == "queued" && row.attempts == 0 && row.lastError == nil)
    }

    @Test("a mail whose code expired before it could be delivered is marked dead (expired), never sent; one not yet expired is sent", arguments: StoreKind.kept)
    func expiredMailIsNotSent(_ kind: StoreKind) async throws {
        defer { directory.remove() }
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        let stale = mail(expiresAt: clock.now.addingTimeInterval(3600))
        try await store.enqueueMail(stale, at: clock.now)
        let transport = ScriptedTransport([.transient("relay down")])
        let outbox = worker(store, transport)
        #expect(try await outbox.deliverDue() == .init(retried: 1))
        clock.advance(by: 3600)
        let fresh = mail(expiresAt: clock.now.addingTimeInterval(60))
        try await store.enqueueMail(fresh, at: clock.now)
        #expect(try await outbox.deliverDue() == .init(sent: 1, dead: 1))
        #expect(transport.delivered.map(\.messageID) == [stale.messageID, fresh.messageID])
        let rows = try await store.outboxEntries()
        #expect(rows.map(\.state) == ["dead", "sent"])
        #expect(rows.first?.lastError == "expired")
        #expect(rows.first?.message.text == "", "the dead mail's body (its code) is blanked")
        #expect(outbox.metrics.snapshot.dead == 1)
    }

    @Test("MailComposer sets expiresAt to the mail's date plus the code's lifetime; a row stored without it decodes as nil")
    func expiresAtFromComposer() throws {
        let date = Date(timeIntervalSince1970: 1_764_000_000)
        let message = MailComposer().message(.verifyEmail, to: "ada@example.com", code: "c", ttl: 900, preferences: "en", date: date)
        #expect(message.expiresAt == date.addingTimeInterval(900))
        var json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(message)) as? [String: Any] ?? [:]
        #expect(json["expiresAt"] != nil)
        json["expiresAt"] = nil
        let old = try JSONDecoder().decode(MailMessage.self, from: JSONSerialization.data(withJSONObject: json))
        #expect(old.expiresAt == nil)
        #expect(old.messageID == message.messageID)
    }

    @Test("the hourly purge removes local mailbox files older than the outbox retention, and keeps newer ones and foreign files")
    func mailboxPurge() async throws {
        defer { directory.remove() }
        let folder = directory.file("mailbox")
        let mailbox = LocalMailbox(folder: folder, clock: clock.wallClock)
        try await mailbox.deliver(mail())
        clock.advance(by: 2 * 86_400)
        try await mailbox.deliver(mail())
        try Data("notes".utf8).write(to: folder.appendingPathComponent("README"))
        clock.advance(by: 86_400 + 1)
        let (store, cleanup) = try await makeStore(.sqlite)
        defer { cleanup() }
        let outbox = worker(store, mailbox, retention: 3 * 86_400)
        try await outbox.deliverDue()
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(left.count == 2)
        #expect(left.contains("README"))
        #expect(left.contains { $0.hasPrefix("\(clock.now.addingTimeInterval(-86_401).millisecondsSince1970)-") })
        #expect(try mailbox.purge(deliveredBefore: clock.now) == 1)
        #expect(try LocalMailbox(folder: directory.file("absent")).purge(deliveredBefore: clock.now) == 0)
    }
}
