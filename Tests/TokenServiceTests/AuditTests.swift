import Foundation
import GatehouseContracts
import GatehouseTestSupport
import Testing
@testable import TokenService

/// The token service's audit log (issue 22 §3): each revocation appends its event in its own
/// transaction; `token.listAudit` pages it; the sweep prunes it by retention.
@Suite("Token service: audit log")
struct TokenAuditTests {
    @Test("sign-out, sign-out everywhere and a reused refresh token are recorded once each, with the session, user, reason and actor", arguments: TokenStoreKind.allCases)
    func revocationsAreRecorded(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let first = try await h.issue(user: "user-audit")
        let second = try await h.issue(user: "user-audit")
        let third = try await h.issue(user: "user-audit")
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: first.sessionID, reason: "sign_out"))
        // Revoking it again revokes nothing and records nothing.
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: first.sessionID, reason: "sign_out"))
        // The refresh token of `third` used again after the grace window: reuse.
        let rotated = try await h.service.refresh(RefreshRequest(refreshToken: third.refreshToken))
        h.clock.advance(by: 60)
        #expect(await expectCode(.refreshTokenReused) { try await h.service.refresh(RefreshRequest(refreshToken: third.refreshToken)) })
        _ = rotated
        let everywhere = try await h.service.revokeAllSessions(UserSessionsRequest(userID: "user-audit", reason: "password_changed"))
        #expect(everywhere.count == 1)  // `second` only: the others were revoked already
        // Nothing left to revoke: no event.
        _ = try await h.service.revokeAllSessions(UserSessionsRequest(userID: "user-audit", reason: "password_changed"))

        let page = try await h.service.listAudit(ListAuditRequest())
        #expect(page.events.map(\.kind) == [AuditEvent.Kind.sessionRevoked, AuditEvent.Kind.refreshTokenReused, AuditEvent.Kind.sessionsRevoked])
        #expect(page.events.map(\.reason) == ["sign_out", "refresh_token_reused", "password_changed"])
        #expect(page.events.map(\.actor) == [AuditEvent.Actor.user, AuditEvent.Actor.user, AuditEvent.Actor.system])
        #expect(page.events.map(\.sessionID) == [first.sessionID, third.sessionID, ""])
        #expect(page.events.allSatisfy { $0.userID == "user-audit" })
        #expect(page.events[2].detailJSON == #"{"sessions":1}"#)
        #expect(page.events.map(\.seq) == [1, 2, 3])
        #expect(page.nextAfterSeq == 3)
        _ = second
        // No token of any kind in the log.
        let tokens = [first, second, third].flatMap { [$0.refreshToken, $0.accessToken] } + [rotated.refreshToken]
        for event in page.events {
            let text = "\(event)"
            #expect(!tokens.contains { text.contains($0) })
        }
    }

    @Test("listAudit: after a position, by user, since a time, a page limit; limits outside 0…1000 and long user ids are refused", arguments: TokenStoreKind.allCases)
    func listing(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        for user in ["user-a", "user-b", "user-a"] {
            let session = try await h.issue(user: user)
            _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: session.sessionID))
            h.clock.advance(by: 10)
        }
        let all = try await h.service.listAudit(ListAuditRequest()).events
        #expect(all.count == 3)
        #expect(try await h.service.listAudit(ListAuditRequest(userID: "user-a")).events.map(\.seq) == [1, 3])
        #expect(try await h.service.listAudit(ListAuditRequest(afterSeq: 1)).events.map(\.seq) == [2, 3])
        let paged = try await h.service.listAudit(ListAuditRequest(limit: 2))
        #expect(paged.events.count == 2 && paged.nextAfterSeq == 2)
        #expect(try await h.service.listAudit(ListAuditRequest(since: all[2].occurredAt)).events.map(\.seq) == [3])
        #expect(try await h.service.listAudit(ListAuditRequest(afterSeq: 3)) == ListAuditResponse(events: [], nextAfterSeq: 3))
        #expect(await expectCode(.invalidArgument) { try await h.service.listAudit(ListAuditRequest(limit: 1001)) })
        #expect(await expectCode(.invalidArgument) { try await h.service.listAudit(ListAuditRequest(limit: -1)) })
        #expect(await expectCode(.invalidArgument) { try await h.service.listAudit(ListAuditRequest(userID: String(repeating: "u", count: 129))) })
        // A date far outside what is stored is refused, never a crash.
        #expect(await expectCode(.invalidArgument) { try await h.service.listAudit(ListAuditRequest(since: Date(timeIntervalSince1970: -8.6e16))) })
    }

    @Test("the sweep prunes events older than the audit retention and keeps newer ones", arguments: TokenStoreKind.allCases)
    func retention(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let old = try await h.issue(user: "user-old")
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: old.sessionID))
        h.clock.advance(by: h.service.configuration.auditRetention - 5)
        let recent = try await h.issue(user: "user-new")
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: recent.sessionID))
        h.clock.advance(by: 10)
        _ = try await h.service.sweep()
        #expect(try await h.service.listAudit(ListAuditRequest()).events.map(\.userID) == ["user-new"])
    }
}
