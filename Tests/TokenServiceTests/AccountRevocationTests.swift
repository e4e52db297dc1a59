import Foundation
import GatehouseContracts
import GatehouseTestSupport
import Testing
@testable import TokenService

/// `token.revokeAllSessions` for the self-service account methods: a session left alone after a
/// password change, and the client details blanked when the user is deleted.
@Suite("Token service: account revocations")
struct AccountRevocationTests {
    @Test("exceptSessionID leaves that session alone; the reply names only the others", arguments: TokenStoreKind.allCases)
    func exceptSession(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let keep = try await h.issue(user: "user-k")
        let other = try await h.issue(user: "user-k")
        let third = try await h.issue(user: "user-k")
        let reply = try await h.service.revokeAllSessions(
            UserSessionsRequest(userID: "user-k", reason: "password_changed", exceptSessionID: keep.sessionID))
        #expect(reply.count == 2)
        #expect(Set(reply.sessionIDs) == [other.sessionID, third.sessionID])
        let refreshed = try await h.service.refresh(RefreshRequest(refreshToken: keep.refreshToken))
        #expect(refreshed.sessionID == keep.sessionID)
        #expect(await expectCode(.sessionRevoked) { try await h.service.refresh(RefreshRequest(refreshToken: other.refreshToken)) })
        let sessions = try await h.service.listSessions(UserSessionsRequest(userID: "user-k")).sessions
        #expect(sessions.filter { $0.revokedAt != nil }.allSatisfy { $0.revokeReason == "password_changed" })
        #expect(sessions.first { $0.sessionID == keep.sessionID }?.revokedAt == nil)
        // A malformed exception is refused and revokes nothing.
        #expect(await expectCode(.invalidArgument) {
            try await h.service.revokeAllSessions(UserSessionsRequest(userID: "user-k", exceptSessionID: ""))
        })
        #expect(try await h.service.refresh(RefreshRequest(refreshToken: refreshed.refreshToken)).sessionID == keep.sessionID)
    }

    @Test("reason user_deleted blanks the user agent and IP of every session of the user, revoked before or now; others keep theirs", arguments: TokenStoreKind.allCases)
    func deletionScrubsClientDetails(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let earlier = try await h.issue(user: "user-d")
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: earlier.sessionID, reason: "sign_out"))
        let live = try await h.issue(user: "user-d")
        let bystander = try await h.issue(user: "user-e")
        // Not a deletion: the details stay.
        _ = try await h.service.revokeAllSessions(UserSessionsRequest(userID: "user-e", reason: "sign_out_everywhere"))
        let reply = try await h.service.revokeAllSessions(UserSessionsRequest(userID: "user-d", reason: "user_deleted"))
        #expect(reply.count == 1)
        #expect(Set(reply.sessionIDs) == [earlier.sessionID, live.sessionID])
        let deleted = try await h.service.listSessions(UserSessionsRequest(userID: "user-d")).sessions
        #expect(deleted.count == 2)
        #expect(deleted.allSatisfy { $0.client == ClientInfo() && $0.revokedAt != nil && $0.userID == "user-d" })
        let kept = try await h.service.listSessions(UserSessionsRequest(userID: "user-e")).sessions
        #expect(kept.map(\.sessionID) == [bystander.sessionID])
        #expect(kept.allSatisfy { $0.client == ClientInfo(userAgent: "tests", ip: "127.0.0.1") })
    }
}
