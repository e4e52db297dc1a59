import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import GRDB
@testable import IdentityService
import PostgresNIO
@testable import PostgresStores
import Mail
import Synchronization
import Testing

/// A transport that answers from a script (one outcome per call; success once the script is
/// used up) and records what it was handed.
final class ScriptedTransport: MailTransport {
    private let script: Mutex<[MailDeliveryError?]>
    private let handed = Mutex<[MailMessage]>([])

    init(_ script: [MailDeliveryError?] = []) { self.script = Mutex(script) }

    var delivered: [MailMessage] { handed.withLock { $0 } }

    func deliver(_ message: MailMessage) async throws {
        handed.withLock { $0.append(message) }
        if let failure = script.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { throw failure }
    }
}

/// A transport that takes the mail, then finds its task stopping (a role shut down mid-delivery).
final class CancellingTransport: MailTransport {
    private let handed = Mutex<[MailMessage]>([])
    var delivered: [MailMessage] { handed.withLock { $0 } }
    func deliver(_ message: MailMessage) async throws {
        handed.withLock { $0.append(message) }
        throw CancellationError()
    }
}

/// The outbox delivery worker (issue 19 E2) over each store that keeps the outbox (SQLite and
/// PostgreSQL), a `ManualClock` and a scripted transport.
@Suite("Outbox delivery worker")
struct OutboxWorkerTests {
    let clock = ManualClock()

    /// A migrated store of `kind`, and what removes it.
    func makeStore(_ kind: StoreKind) async throws -> (any IdentityStorage, @Sendable () -> Void) {
        let (store, cleanup) = try await kind.make()
        return (identityStorage(store), cleanup)
    }

    func mail(_ n: Int = 1) -> MailMessage {
        MailMessage(
            kind: "password_reset", from: "Gatehouse <no-reply@example.com>", to: "user\(n)@example.com", subject: "Reset \(n)",
            text: "code-\(n)", html: "<p>code-\(n)</p>", date: clock.now)
    }

    func worker(_ store: any IdentityStorage, _ transport: any MailTransport, maxAttempts: Int = 10, random: Double = 0) -> OutboxWorker {
        OutboxWorker(
            store: store, transport: transport, destination: "a test transport", clock: clock.wallClock,
            policy: .init(maxAttempts: maxAttempts), random: { random })
    }

    func entry(_ store: any IdentityStorage) async throws -> OutboxEntry { try #require(try await store.outboxEntries().first) }

    @Test("a delivered mail is marked sent at the clock's time with its body blanked and its headers kept", arguments: StoreKind.kept)
    func sentBlanksBody(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        let message = mail()
        try await store.enqueueMail(message, at: clock.now)
        clock.advance(by: 2)
        let transport = ScriptedTransport()
        let outbox = worker(store, transport)
        #expect(try await outbox.deliverDue() == .init(sent: 1))
        #expect(transport.delivered == [message])
        let row = try await entry(store)
        #expect(row.state == "sent")
        #expect(row.attempts == 1)
        #expect(row.sentAt == clock.now)
        #expect(row.message.text == "" && row.message.html == nil)
        #expect(row.message.messageID == message.messageID && row.message.to == message.to && row.message.subject == message.subject)
        #expect(row.lastError == nil)
        // Sent once: the next pass has nothing to do.
        #expect(try await outbox.deliverDue() == .init())
        #expect(transport.delivered.count == 1)
        #expect(outbox.metrics.snapshot == .init(queued: 0, sent: 1, retried: 0, dead: 0, latencyMillisecondsSum: 2000, latencyBuckets: [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]))
    }

    @Test("a transient failure is retried after the backoff, with the same Message-ID, then delivered", arguments: StoreKind.kept)
    func transientThenSuccess(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        let message = mail()
        try await store.enqueueMail(message, at: clock.now)
        let transport = ScriptedTransport([.transient("421 try later")])
        let outbox = worker(store, transport)
        #expect(try await outbox.deliverDue() == .init(retried: 1))
        var row = try await entry(store)
        #expect(row.state == "queued" && row.attempts == 1 && row.lastError == "421 try later")
        #expect(row.nextAttemptAt == clock.now.addingTimeInterval(30))
        // Not due yet: nothing happens one second early.
        clock.advance(by: 29)
        #expect(try await outbox.deliverDue() == .init())
        clock.advance(by: 1)
        #expect(try await outbox.deliverDue() == .init(sent: 1))
        row = try await entry(store)
        #expect(row.state == "sent" && row.attempts == 2 && row.lastError == nil)
        #expect(transport.delivered.map(\.messageID) == [message.messageID, message.messageID])
        #expect(outbox.metrics.snapshot.retried == 1 && outbox.metrics.snapshot.sent == 1)
    }

    @Test("a permanent failure makes the mail dead at once", arguments: StoreKind.kept)
    func permanentIsDead(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        try await store.enqueueMail(mail(), at: clock.now)
        let transport = ScriptedTransport([.permanent("550 no such user")])
        let outbox = worker(store, transport)
        #expect(try await outbox.deliverDue() == .init(dead: 1))
        let row = try await entry(store)
        #expect(row.state == "dead" && row.attempts == 1 && row.lastError == "550 no such user")
        // Never to be sent: its body (a reset code) is gone from the database, its headers kept.
        #expect(row.message.text == "" && row.message.html == nil && row.message.to == "user1@example.com")
        clock.advance(by: 86_400)
        #expect(try await outbox.deliverDue() == .init())
        #expect(transport.delivered.count == 1)
        #expect(outbox.metrics.snapshot.dead == 1)
    }

    @Test("waits double from 30 s up to 1 h; the last attempt allowed failing makes the mail dead", arguments: StoreKind.kept)
    func backoffThenDead(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        try await store.enqueueMail(mail(), at: clock.now)
        let transport = ScriptedTransport(Array(repeating: .transient("connection refused"), count: 10))
        let outbox = worker(store, transport, maxAttempts: 9)
        var waits: [TimeInterval] = []
        for attempt in 1...8 {
            #expect(try await outbox.deliverDue() == .init(retried: 1), "attempt \(attempt)")
            let row = try await entry(store)
            #expect(row.attempts == attempt)
            let wait = row.nextAttemptAt.timeIntervalSince(clock.now)
            waits.append(wait)
            clock.advance(by: wait - 1)
            #expect(try await outbox.deliverDue() == .init(), "not due a second before")
            clock.advance(by: 1)
        }
        #expect(waits == [30, 60, 120, 240, 480, 960, 1920, 3600])
        #expect(try await outbox.deliverDue() == .init(dead: 1))
        let row = try await entry(store)
        #expect(row.state == "dead" && row.attempts == 9)
        #expect(transport.delivered.count == 9)
        #expect(outbox.metrics.snapshot == .init(queued: 0, sent: 0, retried: 8, dead: 1, latencyMillisecondsSum: 0))
    }

    @Test("stopped after the transport took a mail but before it was marked sent: delivered again after restart, same Message-ID", arguments: StoreKind.kept)
    func atLeastOnce(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        let message = mail()
        try await store.enqueueMail(message, at: clock.now)
        // The relay took the mail, then the process stopped before the row was marked.
        let stopping = CancellingTransport()
        await #expect(throws: CancellationError.self) { try await worker(store, stopping).deliverDue() }
        var row = try await entry(store)
        #expect(row.state == "queued" && row.attempts == 0 && row.nextAttemptAt <= clock.now)
        // After restart, a new worker delivers it again at once.
        let transport = ScriptedTransport()
        #expect(try await worker(store, transport).deliverDue() == .init(sent: 1))
        #expect(stopping.delivered.map(\.messageID) == [message.messageID])
        #expect(transport.delivered.map(\.messageID) == [message.messageID])
        row = try await entry(store)
        #expect(row.state == "sent")
    }

    @Test("a mail the transport took but the database could not mark sent is not sent again, only marked once it can", arguments: StoreKind.kept)
    func markFailureDoesNotResend(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        try await store.enqueueMail(mail(), at: clock.now)
        try await rawExecute(
            store,
            sqlite: """
                CREATE TRIGGER refuse_sent BEFORE UPDATE OF state ON outbox WHEN NEW.state = 'sent'
                BEGIN SELECT RAISE(ABORT, 'the disk is full'); END;
                """,
            postgres: [
                "CREATE FUNCTION refuse_sent() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$",
                "CREATE TRIGGER refuse_sent BEFORE UPDATE OF state ON outbox FOR EACH ROW WHEN (NEW.state = 'sent') EXECUTE FUNCTION refuse_sent()",
            ])
        let transport = ScriptedTransport()
        let outbox = worker(store, transport)
        await #expect(throws: (any Error).self) { _ = try await outbox.deliverDue() }
        await #expect(throws: (any Error).self) { _ = try await outbox.deliverDue() }
        #expect(transport.delivered.count == 1)
        try await rawExecute(store, sqlite: "DROP TRIGGER refuse_sent", postgres: ["DROP TRIGGER refuse_sent ON outbox"])
        #expect(try await outbox.deliverDue() == .init(sent: 1))
        #expect(transport.delivered.count == 1)
        #expect(try await entry(store).state == "sent")
    }

    @Test("a mail enqueued in a transaction that rolls back is never sent; one in a committed transaction is", arguments: StoreKind.kept)
    func rolledBackChangesSendNothing(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        struct ChangeFailed: Error {}
        let (doomed, kept) = (mail(1), mail(2))
        let now = clock.now
        switch store {
        case let sqlite as SQLiteUserStore:
            await #expect(throws: ChangeFailed.self) {
                try await sqlite.pool.write { db in
                    try SQLiteUserStore.enqueue(doomed, in: db, at: now)
                    throw ChangeFailed()  // the change the mail was about fails: its transaction rolls back
                }
            }
            try await sqlite.pool.write { db in try SQLiteUserStore.enqueue(kept, in: db, at: now) }
        case let postgres as PostgresUserStore:
            await #expect(throws: (any Error).self) {
                try await postgres.mailTransaction { connection, wake in
                    try await PostgresUserStore.enqueue(doomed, on: connection, at: now, wake: wake, logger: postgres.queryLogger)
                    throw ChangeFailed()
                }
            }
            try await postgres.mailTransaction { connection, wake in
                try await PostgresUserStore.enqueue(kept, on: connection, at: now, wake: wake, logger: postgres.queryLogger)
            }
        default:
            Issue.record("unexpected store")
        }
        let transport = ScriptedTransport()
        #expect(try await worker(store, transport).deliverDue() == .init(sent: 1))
        #expect(transport.delivered == [kept])
    }

    @Test("a row whose stored message does not decode is marked dead and does not hold up the others", arguments: StoreKind.kept)
    func undecodable(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        for n in 1...2 { try await store.enqueueMail(mail(n), at: clock.now) }
        let broken = "UPDATE outbox SET message = '{}' WHERE id = (SELECT MIN(id) FROM outbox)"
        try await rawExecute(store, sqlite: broken, postgres: [broken])
        let transport = ScriptedTransport()
        #expect(try await worker(store, transport).deliverDue() == .init(sent: 1))
        #expect(transport.delivered.map(\.to) == ["user2@example.com"])
        #expect(try await store.outboxCount(state: "dead") == 1)
    }

    @Test("jitter shortens a wait by up to a fifth, never lengthens it")
    func jitter() {
        let policy = OutboxWorker.Policy()
        #expect(policy.delay(afterAttempt: 1, random: 0) == 30)
        #expect(policy.delay(afterAttempt: 1, random: 0.5) == 27)
        #expect(policy.delay(afterAttempt: 1, random: 0.999_999) > 24)
        #expect(policy.delay(afterAttempt: 30, random: 0) == 3600)
        #expect(policy.delay(afterAttempt: 30, random: 1) == 2880)
    }

    @Test("sent and dead rows are purged after 7 days; queued ones stay", arguments: StoreKind.kept)
    func purge(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        let transport = ScriptedTransport([nil, .permanent("550"), .transient("451")])
        let outbox = worker(store, transport)
        for n in 1...3 { try await store.enqueueMail(mail(n), at: clock.now) }
        try await outbox.deliverDue()
        #expect(try await store.outboxEntries().map(\.state) == ["sent", "dead", "queued"])
        clock.advance(by: 7 * 86_400 + 1)
        let kept = try await store.outboxEntries()
        #expect(kept.count == 3)
        try await outbox.deliverDue()
        // Sent and dead rows older than 7 days are gone; the queued one stayed (and is delivered now).
        #expect(try await store.outboxEntries().map(\.message.to) == ["user3@example.com"])
    }

    @Test("run() delivers a mail enqueued while it sleeps without waiting for its poll interval, and stops when cancelled", arguments: StoreKind.kept)
    func runWakesOnEnqueue(_ kind: StoreKind) async throws {
        let (store, cleanup) = try await makeStore(kind)
        defer { cleanup() }
        let transport = ScriptedTransport()
        let outbox = OutboxWorker(
            store: store, transport: transport, destination: "a test transport", clock: clock.wallClock,
            policy: .init(pollInterval: .seconds(3600)))
        let running = Task { await outbox.run() }
        try await store.enqueueMail(mail(1), at: clock.now)
        try await waitUntil("the first mail sent") { try await store.outboxCount(state: "sent") == 1 }
        try await store.enqueueMail(mail(2), at: clock.now)
        try await waitUntil("the second mail sent") { try await store.outboxCount(state: "sent") == 2 }
        running.cancel()
        await running.value
        #expect(transport.delivered.count == 2)
    }

    @Test("two instances on one PostgreSQL database: their workers never deliver one mail twice, and each mail is delivered")
    func twoInstancesShareTheOutbox() async throws {
        let (first, second, cleanup) = try await twoPostgresStores()
        defer { cleanup() }
        for n in 1...40 { try await first.enqueueMail(mail(n), at: clock.now) }
        let (a, b) = (ScriptedTransport(), ScriptedTransport())
        let (workerA, workerB) = (worker(first, a), worker(second, b))
        async let passA = workerA.deliverDue()
        async let passB = workerB.deliverDue()
        let counts = try await (passA, passB)
        #expect(counts.0.sent + counts.1.sent == 40)
        let delivered = (a.delivered + b.delivered).map(\.to)
        #expect(delivered.count == 40 && Set(delivered).count == 40)
        #expect(try await second.outboxCount(state: "sent") == 40)
        // Rows one instance read and did not finish (it stopped) wait out its claim for the other.
        try await first.enqueueMail(mail(41), at: clock.now)
        await #expect(throws: CancellationError.self) { try await worker(first, CancellingTransport()).deliverDue() }
        #expect(try await worker(second, ScriptedTransport()).deliverDue() == .init())
        clock.advance(by: 15 * 60)
        #expect(try await worker(second, ScriptedTransport()).deliverDue() == .init(sent: 1))
    }
}

@Suite("Local mailbox")
struct LocalMailboxTests {
    @Test("one file per mail, 0600 in a 0700 folder, holding rendered(), named <ms>-<id>.eml; a second delivery is a second file")
    func writesFiles() async throws {
        let directory = try TemporaryDirectory(prefix: "mailbox-tests")
        defer { directory.remove() }
        let clock = ManualClock()
        let folder = URL(fileURLWithPath: directory.path("mailbox"))
        let box = LocalMailbox(folder: folder, clock: clock.wallClock)
        let message = MailMessage(
            messageID: "<abc.def@gatehouse.invalid>", kind: "password_reset", from: "Gatehouse <no-reply@example.com>",
            to: "ada@example.com", subject: "パスワードの再設定", text: "code 123", html: "<b>code</b>", date: clock.now)
        try await box.deliver(message)
        clock.advance(by: 1)
        try await box.deliver(message)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        let ms = clock.now.millisecondsSince1970
        #expect(names == ["\(ms - 1000)-abc.def_gatehouse.invalid.eml", "\(ms)-abc.def_gatehouse.invalid.eml"])
        for name in names {
            let path = folder.appendingPathComponent(name).path
            #expect(try String(contentsOfFile: path, encoding: .utf8) == message.rendered())
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)
            #expect(mode.intValue & 0o777 == 0o600)
        }
        let folderMode = try #require(try FileManager.default.attributesOfItem(atPath: folder.path)[.posixPermissions] as? NSNumber)
        #expect(folderMode.intValue & 0o777 == 0o700)
    }

    @Test("a folder that cannot be written is a transient failure")
    func unwritable() async throws {
        let directory = try TemporaryDirectory(prefix: "mailbox-tests")
        defer { directory.remove() }
        let file = directory.path("not-a-folder")
        _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        let box = LocalMailbox(folder: URL(fileURLWithPath: file).appendingPathComponent("mailbox"))
        let message = MailMessage(kind: "k", from: "a@example.com", to: "b@example.com", subject: "s", text: "t", date: Date())
        await #expect(throws: MailDeliveryError.self) { try await box.deliver(message) }
        do { try await box.deliver(message) } catch let error as MailDeliveryError {
            guard case .transient = error else { Issue.record("expected transient, got \(error)"); return }
        }
    }
}
