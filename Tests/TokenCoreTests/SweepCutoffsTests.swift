import Foundation
import Testing
import TokenCore

/// The token sweep's two instants, as a table: no store, no clock.
@Suite("Sweep cutoffs")
struct SweepCutoffsTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)
    static let day: TimeInterval = 86_400

    @Test(
        "ended sessions are kept for the retention; refresh tokens and idle sessions for the idle timeout and the retention",
        arguments: [
            [7 * day, 30 * day, -7 * day, -37 * day],
            [0, 30 * day, 0, -30 * day],
            [7 * day, 0, -7 * day, -7 * day],
        ] as [[TimeInterval]])
    func cutoffs(_ row: [TimeInterval]) {
        let (retention, idle) = (row[0], row[1])
        let (ended, idleBefore) = (Self.now.addingTimeInterval(row[2]), Self.now.addingTimeInterval(row[3]))
        let c = SweepCutoffs(now: Self.now, retention: retention, idleTimeout: idle)
        #expect(c.endedBefore == ended)
        #expect(c.idleBefore == idleBefore)
        #expect(c.idleBefore <= c.endedBefore, "a token outlives the end of its session by at least the idle timeout")
    }
}
