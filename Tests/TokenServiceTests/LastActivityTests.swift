import Foundation
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import RPCRouting
import Testing
import TokenCore
@testable import TokenService

/// `token.lastActivity`: what the identity service's anonymous sweep asks instead of having
/// every refresh write to the users database.
@Suite("token.lastActivity")
struct LastActivityTests {
    @Test("each user's latest session use: issue, then refresh; revoked sessions count; unknown users are absent", arguments: TokenStoreKind.allCases)
    func latestUse(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        defer { try? FileManager.default.removeItem(at: h.dir) }
        let caller = LocalCaller(router: h.service.router())
        let issuedAt = h.clock.now.roundedToMilliseconds
        let first = try await h.issue(user: "user-a")
        _ = try await h.issue(user: "user-b")
        h.clock.advance(by: 3_600)
        // A second session of user-a, signed out at once: its issue still counts as a use.
        let second = try await h.issue(user: "user-a")
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: second.sessionID))
        let secondAt = h.clock.now.roundedToMilliseconds

        var reply = try await caller.call(TokenAPI.lastActivity, LastActivityRequest(userIDs: ["user-a", "user-b", "nobody"]))
        var byUser = Dictionary(uniqueKeysWithValues: reply.entries.map { ($0.userID, $0.lastUsedAt) })
        #expect(byUser == ["user-a": secondAt, "user-b": issuedAt])

        // A refresh moves the session's last use; asking changes nothing.
        h.clock.advance(by: 86_400)
        _ = try await h.service.refresh(RefreshRequest(refreshToken: first.refreshToken))
        reply = try await caller.call(TokenAPI.lastActivity, LastActivityRequest(userIDs: ["user-a", "user-a"]))
        byUser = Dictionary(uniqueKeysWithValues: reply.entries.map { ($0.userID, $0.lastUsedAt) })
        #expect(byUser == ["user-a": h.clock.now.roundedToMilliseconds])
        #expect(try await caller.call(TokenAPI.lastActivity, LastActivityRequest(userIDs: [])).entries.isEmpty)
    }

    @Test("too many users or a malformed id answers invalid_argument", arguments: TokenStoreKind.allCases)
    func badInput(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        defer { try? FileManager.default.removeItem(at: h.dir) }
        let caller = LocalCaller(router: h.service.router())
        let tooMany = (0...TokenAPI.maxLastActivityUsers).map { "user-\($0)" }
        #expect(await expectCode(.invalidArgument) { try await caller.call(TokenAPI.lastActivity, LastActivityRequest(userIDs: tooMany)) })
        #expect(await expectCode(.invalidArgument) { try await caller.call(TokenAPI.lastActivity, LastActivityRequest(userIDs: [""])) })
        let long = String(repeating: "x", count: 129)
        #expect(await expectCode(.invalidArgument) { try await caller.call(TokenAPI.lastActivity, LastActivityRequest(userIDs: [long])) })
        // The most a call may ask about is answered.
        let most = (0..<TokenAPI.maxLastActivityUsers).map { "user-\($0)" }
        #expect(try await caller.call(TokenAPI.lastActivity, LastActivityRequest(userIDs: most)).entries.isEmpty)
    }

    @Test("only the identity service may call it over authenticated links")
    func callers() {
        #expect(TokenAPI.lastActivity.callers == [.identity])
        #expect(TokenAPI.lastActivity.idempotent)
    }
}
