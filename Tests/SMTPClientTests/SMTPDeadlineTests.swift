import Foundation
import GatehouseTestSupport
import Mail
import Testing

@testable import SMTPClient

/// A relay that answers every command in time but never finishes (a tarpit): the SMTP client
/// lets its caller's deadline end the conversation (issue 19 part 2, F4).
@Suite("SMTP transport and a stalling relay", .timeLimit(.minutes(1)))
struct SMTPDeadlineTests {
    @Test("cancelling the delivery's task closes the connection at once and throws CancellationError, though each command is within its timeout")
    func cancellationClosesTheConnection() async throws {
        let harness = try await SMTPHarness.start(tarpit: 30)
        defer { harness.stop() }
        let transport = SMTPTransportTests.transport(harness, commandTimeout: .seconds(40))
        let delivery = Task { try await transport.deliver(SMTPTransportTests.mail()) }
        try await waitUntil("the relay to stall the conversation") { harness.stalled }
        let cancelled = ContinuousClock.now
        delivery.cancel()
        let result = await delivery.result
        #expect(ContinuousClock.now - cancelled < .seconds(5), "the delivery did not stop when its task was cancelled")
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(try harness.messages().isEmpty)
    }

    @Test("a task cancelled before the connection exists never talks to the relay")
    func cancelledBeforeConnecting() async throws {
        let harness = try await SMTPHarness.start()
        defer { harness.stop() }
        let transport = SMTPTransportTests.transport(harness)
        let delivery = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await transport.deliver(SMTPTransportTests.mail())
        }
        await #expect(throws: CancellationError.self) { try await delivery.value }
        #expect(try harness.messages().isEmpty)
    }
}

extension SMTPDeadlineTests {
    @Test("a relay that does not answer QUIT is not waited for: the mail counts as delivered within seconds")
    func quitNotAwaited() async throws {
        let harness = try await SMTPHarness.start(stallQuit: 30)
        defer { harness.stop() }
        let started = ContinuousClock.now
        try await SMTPTransportTests.transport(harness, commandTimeout: .seconds(40)).deliver(SMTPTransportTests.mail())
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(try harness.messages().count == 1)
    }
}
