import Foundation
import GatehouseContracts
import GatehouseTestSupport
import ProtoCodec
import RPCRouting
import Synchronization
import Testing
import TokenCore
@testable import TokenService

@Suite("Sessions and refresh-token rotation")
struct RefreshTests {
    @Test("issue, then refresh rotates the token; the old one replays the same successor inside the grace window", arguments: TokenStoreKind.allCases)
    func rotationAndGrace(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let first = try await h.issue()
        #expect(first.refreshToken.count == 43)
        let second = try await h.service.refresh(RefreshRequest(refreshToken: first.refreshToken))
        #expect(second.refreshToken != first.refreshToken)
        #expect(second.sessionID == first.sessionID)
        h.clock.advance(by: 5)
        let replay = try await h.service.refresh(RefreshRequest(refreshToken: first.refreshToken))
        #expect(replay.refreshToken == second.refreshToken)
        // The successor keeps working.
        let third = try await h.service.refresh(RefreshRequest(refreshToken: second.refreshToken))
        #expect(third.refreshToken != second.refreshToken)
    }

    @Test("refresh asks the identity service for the claims with what is left of its own deadline", arguments: TokenStoreKind.allCases)
    func claimsCallInheritsTheDeadline(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let first = try await h.issue()
        // Far from any default (2 s), so a fresh budget could not match it by chance.
        let deadline = ContinuousClock.now + .seconds(7)
        _ = try await LocalCaller(router: h.service.router()).call(TokenAPI.refresh, RefreshRequest(refreshToken: first.refreshToken), deadline: deadline)
        #expect(h.identity.deadlines.withLock { $0 } == [deadline])
    }

    @Test("reuse after the grace window revokes the whole session and is announced", arguments: TokenStoreKind.allCases)
    func reuseDetection(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let first = try await h.issue()
        let second = try await h.service.refresh(RefreshRequest(refreshToken: first.refreshToken))
        h.clock.advance(by: 11)
        #expect(await expectCode(.refreshTokenReused) { try await h.service.refresh(RefreshRequest(refreshToken: first.refreshToken)) })
        // The legitimate successor is dead too: the session is revoked.
        #expect(await expectCode(.sessionRevoked) { try await h.service.refresh(RefreshRequest(refreshToken: second.refreshToken)) })
        #expect(await h.settledTopics() == [TokenAPI.Topic.sessionRevoked])
        let event = try #require(try await h.revokedEvents().first)
        #expect(event.sessionID == first.sessionID && event.reason == "refresh_token_reused")
    }

    @Test("concurrent refreshes of one token never mint different successors", arguments: TokenStoreKind.allCases)
    func concurrentRefreshes(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let first = try await h.issue()
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<16 {
                group.addTask { try await h.service.refresh(RefreshRequest(refreshToken: first.refreshToken)).refreshToken }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(results.count == 1)
    }

    @Test("unknown, malformed and empty refresh tokens are invalid_refresh_token", arguments: TokenStoreKind.allCases)
    func invalidTokens(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        for token in ["", "short", String(repeating: "A", count: 43), String(repeating: "!", count: 43), "' OR 1=1 --", String(repeating: "x", count: 100_000)] {
            #expect(await expectCode(.invalidRefreshToken) { try await h.service.refresh(RefreshRequest(refreshToken: token)) })
        }
    }

    @Test("idle and absolute expiry end a session", arguments: TokenStoreKind.allCases)
    func expiry(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let idle = try await h.issue()
        h.clock.advance(by: 31 * 86_400)
        #expect(await expectCode(.sessionExpired) { try await h.service.refresh(RefreshRequest(refreshToken: idle.refreshToken)) })
        // Absolute: refresh every 20 days until 60 days have passed.
        var tokens = try await h.issue(user: "user-2")
        for _ in 0..<2 {
            h.clock.advance(by: 20 * 86_400)
            tokens = try await h.service.refresh(RefreshRequest(refreshToken: tokens.refreshToken))
        }
        h.clock.advance(by: 20 * 86_400 + 1)
        #expect(await expectCode(.sessionExpired) { try await h.service.refresh(RefreshRequest(refreshToken: tokens.refreshToken)) })
    }

    @Test("a deleted or disabled user, or tokensValidAfter past the auth time, revokes the session at refresh", arguments: TokenStoreKind.allCases)
    func identityChanges(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let deleted = try await h.issue(user: "gone")
        h.identity.claims.withLock { $0["gone"] = UserClaims(exists: false) }
        #expect(await expectCode(.sessionRevoked) { try await h.service.refresh(RefreshRequest(refreshToken: deleted.refreshToken)) })

        let disabled = try await h.issue(user: "off")
        h.identity.claims.withLock { $0["off"] = UserClaims(disabled: true) }
        #expect(await expectCode(.sessionRevoked) { try await h.service.refresh(RefreshRequest(refreshToken: disabled.refreshToken)) })

        let old = try await h.issue(user: "old")
        h.clock.advance(by: 60)
        h.identity.claims.withLock { $0["old"] = UserClaims(email: "o@example.com", tokensValidAfter: h.clock.now) }
        #expect(await expectCode(.sessionRevoked) { try await h.service.refresh(RefreshRequest(refreshToken: old.refreshToken)) })
        #expect(await h.settledTopics().count == 3)
    }

    @Test("revokeSession, revokeAllSessions and listSessions", arguments: TokenStoreKind.allCases)
    func revocation(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let a = try await h.issue()
        let b = try await h.issue()
        let list = try await h.service.listSessions(UserSessionsRequest(userID: "user-1"))
        #expect(list.sessions.count == 2 && list.sessions.allSatisfy { $0.revokedAt == nil && $0.client.userAgent == "tests" })
        #expect(try await h.service.revokeSession(RevokeSessionRequest(sessionID: a.sessionID)).count == 1)
        #expect(try await h.service.revokeSession(RevokeSessionRequest(sessionID: a.sessionID)).count == 0)
        #expect(await expectCode(.sessionRevoked) { try await h.service.refresh(RefreshRequest(refreshToken: a.refreshToken)) })
        #expect(await expectCode(.sessionRevoked) { try await h.service.verifyAccessToken(VerifyRequest(token: a.accessToken)) })
        #expect(try await h.service.revokeAllSessions(UserSessionsRequest(userID: "user-1")).count == 1)
        #expect(await expectCode(.sessionRevoked) { try await h.service.refresh(RefreshRequest(refreshToken: b.refreshToken)) })
        #expect(await h.settledTopics() == [TokenAPI.Topic.sessionRevoked, TokenAPI.Topic.sessionRevoked])
    }

    @Test("bad issueSession input is refused and writes nothing", arguments: TokenStoreKind.allCases)
    func badIssueInput(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        for request in [
            IssueSessionRequest(userID: "", claims: UserClaims(), amr: ["pwd"], authTime: h.clock.now, client: ClientInfo()),
            IssueSessionRequest(userID: String(repeating: "u", count: 200), claims: UserClaims(), amr: ["pwd"], authTime: h.clock.now, client: ClientInfo()),
            IssueSessionRequest(userID: "u", claims: UserClaims(customClaimsJSON: #"{"sub":"admin"}"#), amr: ["pwd"], authTime: h.clock.now, client: ClientInfo()),
            IssueSessionRequest(userID: "u", claims: UserClaims(customClaimsJSON: "[1]"), amr: ["pwd"], authTime: h.clock.now, client: ClientInfo()),
            IssueSessionRequest(userID: "u", claims: UserClaims(), amr: ["a b"], authTime: h.clock.now, client: ClientInfo()),
        ] {
            #expect(await expectCode(.invalidArgument) { try await h.service.issueSession(request) })
        }
        #expect(try await h.service.listSessions(UserSessionsRequest(userID: "u")).sessions.isEmpty)
    }
}
