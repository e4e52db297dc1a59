import Foundation
import GatehouseContracts
import GatehouseTestSupport
import ProtoCodec
import RPCRouting
import Testing
@testable import TokenService
import TokenPorts

@Suite("Revocations: durable, numbered, listed")
struct RevocationFeedTests {
    /// A heartbeat: SQLite's feed beats at once; a shared store's feed first publishes what the
    /// database numbered since its last event (`catchUp`, awaited, where `heartbeat()` would
    /// run it in a task of its own).
    func beat(_ h: Harness) async {
        switch h.kind {
        case .sqlite: h.service.revocationFeed.heartbeat()
        case .postgres: await h.service.revocationFeed.catchUp()
        }
    }

    @Test("every revocation, however made, is numbered 1, 2, 3… in one epoch; the heartbeat carries the last number", arguments: TokenStoreKind.allCases)
    func eventsAreNumberedWithoutGaps(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let a = try await h.issue(user: "user-a")
        let b1 = try await h.issue(user: "user-b")
        let b2 = try await h.issue(user: "user-b")
        let c = try await h.issue(user: "user-c")
        await beat(h)

        let one = try await h.service.revokeSession(RevokeSessionRequest(sessionID: a.sessionID))
        #expect(one == RevokedCount(count: 1, sessionIDs: [a.sessionID]))
        // Again: nothing revoked, no event.
        #expect(try await h.service.revokeSession(RevokeSessionRequest(sessionID: a.sessionID)) == RevokedCount(count: 0))
        let all = try await h.service.revokeAllSessions(UserSessionsRequest(userID: "user-b"))
        #expect(all.count == 2 && Set(all.sessionIDs) == [b1.sessionID, b2.sessionID])
        // A retry (its first reply lost) revokes nothing more, and still names them.
        let retried = try await h.service.revokeAllSessions(UserSessionsRequest(userID: "user-b"))
        #expect(retried.count == 0 && Set(retried.sessionIDs) == [b1.sessionID, b2.sessionID])
        // Refresh-token reuse.
        _ = try await h.service.refresh(RefreshRequest(refreshToken: c.refreshToken))
        h.clock.advance(by: 11)
        _ = try? await h.service.refresh(RefreshRequest(refreshToken: c.refreshToken))
        await beat(h)

        // Decoded as published (`h.revokedEvents()` would catch up, and beat, once more).
        let events = try h.events.events.filter { $0.topic == TokenAPI.Topic.sessionRevoked }.map {
            try ProtobufDecoder().decode(SessionRevokedEvent.self, from: $0.payload)
        }
        #expect(events.map(\.seq) == [1, 2, 3, 4])
        #expect(Set(events.map(\.epoch)) == [h.service.revocationFeed.epoch])
        #expect(events.map(\.sessionID).last == c.sessionID)
        let beats = try h.events.events.filter { $0.topic == TokenAPI.Topic.heartbeat }.map {
            try ProtobufDecoder().decode(RevocationHeartbeat.self, from: $0.payload)
        }
        #expect(beats.map(\.seq) == [0, 4])
        #expect(beats.allSatisfy { $0.epoch == h.service.revocationFeed.epoch })
    }

    @Test("listRevocations holds the sessions whose tokens may still be valid, and the feed's position", arguments: TokenStoreKind.allCases)
    func snapshotIsBoundedByTheTokenLifetime(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind)
        let old = try await h.issue(user: "user-old")
        let recent = try await h.issue(user: "user-recent")
        let live = try await h.issue(user: "user-live")
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: old.sessionID))
        // Past the access-token lifetime plus leeway: every token of `old` has expired.
        let ttl = h.service.configuration.accessTokenTTL + h.service.configuration.leeway
        h.clock.advance(by: ttl + 1)
        _ = try await h.service.revokeSession(RevokeSessionRequest(sessionID: recent.sessionID))

        let snapshot = try await LocalCaller(router: h.service.router()).call(TokenAPI.listRevocations, Empty())
        #expect(snapshot.sessions.map(\.sessionID) == [recent.sessionID])
        #expect(snapshot.sessions.first?.revokedAt == h.clock.now)
        #expect(!snapshot.sessions.contains { $0.sessionID == live.sessionID })
        #expect(snapshot.epoch == h.service.revocationFeed.epoch && snapshot.seq == 2)
        h.clock.advance(by: ttl)
        #expect(try await h.service.listRevocations().sessions.isEmpty)
    }

    @Test("a revocation is committed before it is acknowledged: a new process on the store lists it", arguments: TokenStoreKind.allCases)
    func acknowledgedRevocationsSurviveARestart(_ kind: TokenStoreKind) async throws {
        let first = try await Harness.make(kind)
        let session = try await first.issue()
        _ = try await first.service.revokeAllSessions(UserSessionsRequest(userID: "user-1"))
        // A second service on the same store (as after `kill -9` and a restart).
        let second = try await first.reopen()
        let snapshot = try await second.service.listRevocations()
        #expect(snapshot.sessions.map(\.sessionID) == [session.sessionID])
        switch kind {
        case .sqlite:
            // The numbering is the process's: a new epoch, from 0.
            #expect(snapshot.epoch != first.service.revocationFeed.epoch && snapshot.seq == 0)
        case .postgres:
            // The numbering is the database's: the same epoch, and the revocation keeps its number.
            #expect(snapshot.epoch == first.service.revocationFeed.epoch && snapshot.seq == 1)
            #expect(second.service.revocationFeed.position == 1)
        }
    }

    @Test("the sweep keeps a revoked session listed while its tokens may be valid, whatever the retention", arguments: TokenStoreKind.allCases)
    func sweepKeepsListedRevocations(_ kind: TokenStoreKind) async throws {
        let h = try await Harness.make(kind) { config in
            config.accessTokenTTL = 7200
            config.sessionRetention = 3600
        }
        let (service, clock) = (h.service, h.clock)
        let tokens = try await service.issueSession(IssueSessionRequest(
            userID: "user-1", claims: UserClaims(email: "a@example.com"), amr: ["pwd"], authTime: clock.now, client: ClientInfo()))
        _ = try await service.revokeSession(RevokeSessionRequest(sessionID: tokens.sessionID))
        clock.advance(by: 3601)
        try await service.sweep()
        #expect(try await service.listRevocations().sessions.map(\.sessionID) == [tokens.sessionID])
        clock.advance(by: 7200)
        try await service.sweep()
        #expect(try await service.store.session(id: tokens.sessionID) == nil)
    }
}
