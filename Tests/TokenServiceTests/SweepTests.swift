import Foundation
import TokenPorts
@testable import SQLiteStores
import GatehouseContracts
import GatehouseTestSupport
import Testing
import TokenCore
@testable import TokenService

/// Defaults under test: idle timeout 30 days, absolute lifetime 60 days, retention 7 days, so a
/// refresh token is kept 37 days after it was created.
@Suite("Sweeping ended sessions and old refresh tokens")
struct SweepTests {
    static let day: TimeInterval = 86_400

    func refresh(_ h: Harness, _ token: String) async throws -> SessionTokens {
        try await h.service.refresh(RefreshRequest(refreshToken: token))
    }

    /// `due` sessions signed out 8 days ago (past the retention), then `live` fresh ones, returned.
    func dueAndLive(_ h: Harness, due: Int, live: Int) async throws -> [SessionTokens] {
        for i in 0..<due { _ = try await issueRevoked(h, user: "old-\(i)") }
        h.clock.advance(by: 8 * Self.day)
        var sessions: [SessionTokens] = []
        for i in 0..<live { sessions.append(try await h.issue(user: "live-\(i)")) }
        return sessions
    }

    /// `SQLiteTokenStore.sweep` with the default retention and idle timeout, in batches of `batch`.
    func sweep(_ h: Harness, batch: Int) async throws -> SweepCounts {
        try await h.service.store.sweep(now: h.clock.now, retention: 7 * Self.day, idleTimeout: 30 * Self.day, batch: batch)
    }

    /// A session of `user`, signed out at once.
    func issueRevoked(_ h: Harness, user: String) async throws -> SessionTokens {
        let tokens = try await h.issue(user: user)
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: tokens.sessionID, reason: ""))
        return tokens
    }

    @Test("revoked, expired and idle sessions go once they ended more than the retention ago; live ones stay", arguments: TokenStoreKind.allCases)
    func endedSessions(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let live = try await h.issue(user: "live")
        let revokedLongAgo = try await issueRevoked(h, user: "revoked-long-ago")
        let idle = try await h.issue(user: "idle")
        h.clock.advance(by: 20 * Self.day)
        var liveTokens = try await refresh(h, live.refreshToken)
        let revokedRecently = try await h.issue(user: "revoked-recently")
        h.clock.advance(by: 10 * Self.day)
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: revokedRecently.sessionID, reason: ""))
        h.clock.advance(by: 15 * Self.day)
        liveTokens = try await refresh(h, liveTokens.refreshToken)
        // Day 45: "revoked-long-ago" was revoked on day 0, "idle" went idle on day 30 and
        // "revoked-recently" was revoked on day 30: each ended more than 7 days ago. "live"
        // rotated today.
        #expect(try await h.service.store.rowCounts().sessions == 4)
        let counts = try await h.service.sweep()
        #expect(counts.sessions == 3)
        let remaining = try await h.service.store.rowCounts()
        #expect(remaining.sessions == 1)
        #expect(try await h.service.store.session(id: live.sessionID) != nil)
        // The live session still refreshes; tokens of deleted sessions are unknown now.
        liveTokens = try await refresh(h, liveTokens.refreshToken)
        for gone in [revokedLongAgo, idle, revokedRecently] {
            #expect(await expectCode(.invalidRefreshToken) { try await refresh(h, gone.refreshToken) })
        }
    }

    @Test("a session revoked or gone idle less than the retention ago is kept and still answers with its reason", arguments: TokenStoreKind.allCases)
    func withinRetention(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let revoked = try await issueRevoked(h, user: "revoked")
        let idle = try await h.issue(user: "idle")
        h.clock.advance(by: 6 * Self.day)
        #expect(try await h.service.sweep() == SweepCounts())
        #expect(await expectCode(.sessionRevoked) { try await refresh(h, revoked.refreshToken) })
        // Idle since day 0: it ended on day 30, so it stays until day 37.
        h.clock.advance(by: 30 * Self.day)
        #expect(try await h.service.sweep().sessions == 1)  // the revoked one (day 0 + 7)
        #expect(await expectCode(.sessionExpired) { try await refresh(h, idle.refreshToken) })
        h.clock.advance(by: 1 * Self.day + 1)
        let counts = try await h.service.sweep()
        #expect(counts.sessions == 1)
        #expect(counts.refreshTokens == 2)
        #expect(try await h.service.store.rowCounts() == (0, 0))
    }

    @Test("a superseded token is kept, and its reuse still revokes the session, until idle timeout + retention after it was made", arguments: TokenStoreKind.allCases)
    func oldTokensOfALiveSession(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let first = try await h.issue()
        // A token every 25 days: each rotation happens before the session goes idle.
        h.clock.advance(by: 25 * Self.day)
        let second = try await refresh(h, first.refreshToken)
        h.clock.advance(by: 13 * Self.day)
        // Day 38: `first` (day 0) is older than 37 days: superseded on day 25, 13 days ago.
        let counts = try await h.service.sweep()
        #expect(counts == SweepCounts(sessions: 0, refreshTokens: 1))
        #expect(try await h.service.store.rowCounts() == (1, 1))
        // Presenting it now is an unknown token, not a reuse: the session lives on.
        #expect(await expectCode(.invalidRefreshToken) { try await refresh(h, first.refreshToken) })
        let third = try await refresh(h, second.refreshToken)
        // `second` (day 25) is superseded on day 38 and kept: its reuse is still detected.
        h.clock.advance(by: 1 * Self.day)
        #expect(try await h.service.sweep() == SweepCounts())
        #expect(await expectCode(.refreshTokenReused) { try await refresh(h, second.refreshToken) })
        #expect(await expectCode(.sessionRevoked) { try await refresh(h, third.refreshToken) })
    }

    @Test("a session past its absolute expiry goes 7 days later, however recently it rotated", arguments: TokenStoreKind.allCases)
    func absoluteExpiry(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        var tokens = try await h.issue()
        for _ in 0..<2 {
            h.clock.advance(by: 25 * Self.day)
            tokens = try await refresh(h, tokens.refreshToken)
        }
        // Day 67: expired on day 60, last used on day 50 (not idle yet by the sweep's rule).
        h.clock.advance(by: 17 * Self.day - 1)
        #expect(try await h.service.sweep().sessions == 0)
        #expect(await expectCode(.sessionExpired) { try await refresh(h, tokens.refreshToken) })
        h.clock.advance(by: 2)
        #expect(try await h.service.sweep().sessions == 1)
        #expect(await expectCode(.invalidRefreshToken) { try await refresh(h, tokens.refreshToken) })
    }

    @Test("a sweep running beside concurrent refreshes deletes only what is due and fails none of them", arguments: TokenStoreKind.allCases)
    func besideRefreshes(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let live = try await dueAndLive(h, due: 300, live: 16)
        let sweeping = Task { try await sweep(h, batch: 10) }
        let finals = try await withThrowingTaskGroup(of: String.self) { group in
            for start in live {
                group.addTask {
                    var token = start.refreshToken
                    for _ in 0..<20 { token = try await h.service.refresh(RefreshRequest(refreshToken: token)).refreshToken }
                    return token
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(try await sweeping.value.sessions == 300)
        #expect(try await h.service.store.rowCounts().sessions == 16)
        for token in finals { _ = try await h.service.refresh(RefreshRequest(refreshToken: token)) }
    }

    @Test("a sweep larger than one batch deletes everything due, and leaves what is not", arguments: TokenStoreKind.allCases)
    func batches(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let kept = try await dueAndLive(h, due: 25, live: 7)
        let counts = try await sweep(h, batch: 4)
        #expect(counts.sessions == 25)
        #expect(try await h.service.store.rowCounts().sessions == 7)
        for tokens in kept { _ = try await refresh(h, tokens.refreshToken) }
        // 38 days on, every token of the first 25 sessions is past idle + retention.
        h.clock.advance(by: 30 * Self.day)
        let later = try await sweep(h, batch: 4)
        #expect(later.refreshTokens == 25)
        #expect(try await h.service.store.rowCounts() == (7, 14))
    }
}
