import Foundation
import Testing
import TokenCore

/// The one rule of a refresh (`RefreshRotation.decide`), both stores' decision, as a table.
@Suite("Refresh rotation: the decision")
struct RefreshRotationTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let current = Data(repeating: 1, count: 32)
    static let successor = Data(repeating: 2, count: 32)
    static let older = Data(repeating: 3, count: 32)

    /// A row of the table: what the store read, the presented token, the time, what to do.
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var revoked = false
        /// Seconds from t0 to the session's absolute end.
        var endsIn: TimeInterval = 86_400
        /// Seconds from t0 to the last use (negative: before).
        var lastUsed: TimeInterval = 0
        var currentHash: Data? = RefreshRotationTests.current
        /// Seconds from t0 of the last rotation (nil: never).
        var rotated: TimeInterval? = nil
        var presented: Data = RefreshRotationTests.current
        /// The successor the presented token derives.
        var successor: Data = RefreshRotationTests.successor
        /// Seconds from t0 of the refresh.
        var at: TimeInterval = 1
        var expect: RefreshRotation.Decision
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "the current token rotates", expect: .rotate),
        Case(name: "revoked wins over everything", revoked: true, endsIn: -1, expect: .revoked),
        Case(name: "revoked, current token", revoked: true, expect: .revoked),
        Case(name: "at the absolute end: expired", endsIn: 1, at: 1, expect: .expired),
        Case(name: "a millisecond before the end: rotates", endsIn: 1, at: 0.999, expect: .rotate),
        Case(name: "idle exactly the timeout (100 s): expired", lastUsed: -99, at: 1, expect: .expired),
        Case(name: "idle just under the timeout: rotates", lastUsed: -98.999, at: 1, expect: .rotate),
        Case(name: "expired before reuse is checked", endsIn: 0, presented: older, at: 1, expect: .expired),
        Case(
            name: "the token just rotated, within the grace: replay", currentHash: successor, rotated: -5, presented: current, at: 5,
            expect: .graceReplay),
        Case(
            name: "replay at exactly the grace (10 s): replay", currentHash: successor, rotated: 0, presented: current, at: 10,
            expect: .graceReplay),
        Case(
            name: "replay just past the grace: reuse", currentHash: successor, rotated: 0, presented: current, at: 10.001,
            expect: .reuse),
        Case(name: "the previous token but never rotated (no time): reuse", currentHash: successor, rotated: nil, expect: .reuse),
        Case(
            name: "an older token whose successor is not current: reuse", currentHash: successor, rotated: 0, presented: older,
            successor: older, at: 1, expect: .reuse),
        Case(name: "a session with no current token: reuse", currentHash: nil, expect: .reuse),
    ]

    @Test(arguments: cases)
    func decides(_ c: Case) {
        let state = RefreshRotation.State(
            revoked: c.revoked, expiresAt: Self.t0.addingTimeInterval(c.endsIn), lastUsedAt: Self.t0.addingTimeInterval(c.lastUsed),
            currentHash: c.currentHash, rotatedAt: c.rotated.map { Self.t0.addingTimeInterval($0) })
        let decision = RefreshRotation.decide(
            state, presented: c.presented, successor: c.successor, now: Self.t0.addingTimeInterval(c.at), grace: 10, idleTimeout: 100)
        #expect(decision == c.expect)
    }
}
