import Foundation
import TokenPorts
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import PostgresNIO
import PostgresStores
import ProtoCodec
import Synchronization
import Testing
import TokenCore
@testable import TokenService

/// Several token-service instances on one PostgreSQL database (issue 24): each test starts
/// services (each with a client, a pool, of its own) on one fresh database and makes them race.
@Suite("Several token services on one PostgreSQL database")
struct SharedTokenStoreTests {
    /// Two services on one new database, sharing one clock.
    func pair(configure: @escaping (inout TokenConfiguration) -> Void = { _ in }) async throws -> (Harness, Harness) {
        let clock = ManualClock()
        let a = try await Harness.make(.postgres, clock: clock, configure: configure)
        let b = try await Harness.make(.postgres, database: a.database, clock: clock, identity: a.identity, configure: configure)
        return (a, b)
    }

    /// The `kid` in a JWT's header.
    func kid(_ token: String) throws -> String {
        let header = try #require(Base64URL.decode(String(token.split(separator: ".")[0])))
        let object = try #require(try JSONSerialization.jsonObject(with: header) as? [String: Any])
        return try #require(object["kid"] as? String)
    }

    @Test("one refresh token presented to both services at the same moment rotates once: both get the one successor")
    func concurrentRefreshAcrossInstances() async throws {
        let (a, b) = try await pair()
        for round in 0..<50 {
            let tokens = try await (round.isMultiple(of: 2) ? a : b).issue(user: "user-\(round % 5)")
            let gate = Gate()
            let replies = try await withThrowingTaskGroup(of: String.self) { group in
                for service in [a.service, b.service] {
                    group.addTask {
                        await gate.wait()
                        return try await service.refresh(RefreshRequest(refreshToken: tokens.refreshToken)).refreshToken
                    }
                }
                try await gate.waitForWaiters(2)
                gate.open()
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(replies.count == 2 && Set(replies).count == 1, "round \(round): two different successors")
            #expect(try await a.service.store.currentHash(sessionID: tokens.sessionID) == TokenService.hash(replies[0]))
        }
        // Each session holds its first token and exactly one successor.
        #expect(try await a.service.store.rowCounts() == (50, 100))
    }

    @Test("the stores themselves: of two rotations of one token at once, exactly one rotates and the other is a grace replay")
    func concurrentRotationOutcomes() async throws {
        let (a, b) = try await pair()
        for round in 0..<50 {
            let tokens = try await a.issue(user: "user-\(round)")
            let hash = TokenService.hash(tokens.refreshToken)
            let successor = TokenService.hash(a.service.successor(of: tokens.refreshToken))
            let now = a.clock.now
            let gate = Gate()
            let outcomes = try await withThrowingTaskGroup(of: RotationOutcome.self) { group in
                for store in [a.service.store, b.service.store] {
                    group.addTask {
                        await gate.wait()
                        return try await store.rotate(hash: hash, successorHash: successor, now: now, grace: 10, idleTimeout: 86_400)
                    }
                }
                try await gate.waitForWaiters(2)
                gate.open()
                return try await group.reduce(into: [RotationOutcome]()) { $0.append($1) }
            }
            let rotated = outcomes.filter { if case .rotated = $0 { true } else { false } }
            let replays = outcomes.filter { if case .graceReplay = $0 { true } else { false } }
            #expect(rotated.count == 1 && replays.count == 1, "round \(round): \(outcomes)")
            // Presented again past the grace window, on either instance: reuse, as SQLite decides.
            if round == 0 {
                let later = now.addingTimeInterval(11)
                let reuse = try await b.service.store.rotate(hash: hash, successorHash: successor, now: later, grace: 10, idleTimeout: 86_400)
                guard case .reused(let session) = reuse else { Issue.record("expected reuse, got \(reuse)"); continue }
                #expect(session.revokeReason == "refresh_token_reused" && session.revokedAt == later)
                #expect(try await a.service.store.isRevoked(sessionID: tokens.sessionID))
            }
        }
    }

    @Test("ten services starting at once on an empty database make one first key and one refresh secret")
    func concurrentFirstStart() async throws {
        let database = try await PostgresDatabase.make()
        let clock = ManualClock()
        let identity = FakeIdentityService()
        let services = try await withThrowingTaskGroup(of: Harness.self) { group in
            for _ in 0..<10 {
                group.addTask { try await Harness.make(.postgres, database: database, clock: clock, identity: identity) }
            }
            return try await group.reduce(into: [Harness]()) { $0.append($1) }
        }
        #expect(services.count == 10)
        let keys = try await services[0].service.store.keys()
        #expect(keys.count == 1)
        #expect(Set(services.map(\.service.keys.activeKid)) == [keys[0].kid])
        // One secret: every service derives the same successor of a token.
        let token = Base64URL.encode(Data(repeating: 7, count: 32))
        #expect(Set(services.map { $0.service.successor(of: token) }).count == 1)
        // And one feed epoch.
        #expect(Set(services.map(\.service.revocationFeed.epoch)).count == 1)
        // A session issued by one refreshes on another.
        let tokens = try await services[3].issue()
        let refreshed = try await services[7].service.refresh(RefreshRequest(refreshToken: tokens.refreshToken))
        #expect(refreshed.sessionID == tokens.sessionID)
        _ = try await services[1].service.verifyAccessToken(VerifyRequest(token: refreshed.accessToken))
    }

    @Test("revocations made on both services are numbered 1…n without a gap; each service's feed publishes all of them, in order")
    func revocationsAreNumberedAcrossInstances() async throws {
        let (a, b) = try await pair()
        let epoch = a.service.revocationFeed.epoch
        #expect(b.service.revocationFeed.epoch == epoch && !epoch.isEmpty)
        // Sessions of eight users, three each, issued on either service.
        var sessions: [String: [SessionTokens]] = [:]
        for user in 0..<8 {
            for n in 0..<3 { sessions["user-\(user)", default: []].append(try await (n == 1 ? b : a).issue(user: "user-\(user)")) }
        }
        // At once: sign-outs and sign-outs everywhere, on both services.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for user in 0..<8 {
                let service = (user.isMultiple(of: 2) ? a : b).service
                let mine = sessions["user-\(user)"]!
                if user < 4 {
                    group.addTask { _ = try await service.revokeAllSessions(UserSessionsRequest(userID: "user-\(user)")) }
                } else {
                    for tokens in mine {
                        group.addTask { _ = try await service.revokeSession(RevokeSessionRequest(sessionID: tokens.sessionID)) }
                    }
                }
            }
            try await group.waitForAll()
        }
        // A reuse on one service, after a rotation on the other.
        let reused = try await a.issue(user: "user-r")
        _ = try await b.service.refresh(RefreshRequest(refreshToken: reused.refreshToken))
        a.clock.advance(by: 11)
        #expect(await expectCode(.refreshTokenReused) { try await a.service.refresh(RefreshRequest(refreshToken: reused.refreshToken)) })

        let all = sessions.values.flatMap { $0.map(\.sessionID) } + [reused.sessionID]
        let onA = try await a.revokedEvents()
        let onB = try await b.revokedEvents()
        #expect(onA.map(\.seq) == Array(1...UInt64(all.count)))
        #expect(onA == onB, "both services publish the same events, in the same order")
        #expect(Set(onA.map(\.sessionID)) == Set(all) && onA.count == all.count)
        #expect(onA.allSatisfy { $0.epoch == epoch })
        #expect(onA.last?.sessionID == reused.sessionID && onA.last?.reason == "refresh_token_reused")
        // The snapshot agrees with the feeds, on either service.
        for h in [a, b] {
            let snapshot = try await h.service.listRevocations()
            #expect(snapshot.epoch == epoch && snapshot.seq == UInt64(all.count))
            #expect(Set(snapshot.sessions.map(\.sessionID)) == Set(all))
            #expect(h.service.revocationFeed.position == UInt64(all.count))
        }
        // Every revocation is in the audit log once, in commit order.
        let audit = try await a.service.listAudit(ListAuditRequest()).events
        #expect(audit.map(\.seq) == Array(1...UInt64(audit.count)))
        #expect(audit.count == 17)  // four sign-outs everywhere, twelve sign-outs, one reuse
    }

    @Test("runIfLeader: of two stores asking at once exactly one leads; once it is done the other can lead")
    func leaderElection() async throws {
        let database = try await PostgresDatabase.make()
        let (first, firstClient) = try database.store()
        let (second, secondClient) = try database.store()
        try await first.migrate()
        defer { withExtendedLifetime((firstClient, secondClient)) {} }
        for round in 0..<5 {
            let gate = Gate()
            let ran = Recorder<Int>()
            let answers = Recorder<Bool>()
            let tasks = [first, second].map { store in
                Task {
                    let led = try await store.runIfLeader("sweep") {
                        ran.append(1)
                        await gate.wait()
                    }
                    answers.append(led)
                }
            }
            // One leads (and holds the lead at the gate), the other is refused meanwhile.
            try await gate.waitForWaiters(1)
            try await waitUntil("the other store's answer") { answers.values == [false] }
            #expect(ran.values.count == 1, "round \(round)")
            // Another job is not held up by this one.
            #expect(try await second.runIfLeader("audit-prune") {})
            gate.open()
            for task in tasks { try await task.value }
            #expect(answers.values.sorted { !$0 && $1 } == [false, true])
            #expect(ran.values.count == 1)
            // Released: either can lead now, one after the other.
            #expect(try await second.runIfLeader("sweep") {})
            #expect(try await first.runIfLeader("sweep") {})
        }
        // A job that throws releases the lead too, and its error comes back as it was.
        struct JobFailed: Error {}
        await #expect(throws: JobFailed.self) { try await first.runIfLeader("sweep") { throw JobFailed() } }
        #expect(try await second.runIfLeader("sweep") {})
    }

    @Test("a key rotated on one service with an activation delay is published by the other after loadKeys, and signs only from its activation, on both")
    func keyRotationAcrossInstances() async throws {
        let (a, b) = try await pair { $0.keyActivationDelay = 5 }
        let first = a.service.keys.activeKid
        #expect(b.service.keys.activeKid == first)
        let activation = a.clock.now.addingTimeInterval(5).millisecondsSince1970
        let rotated = try await a.service.rotateKeys()
        #expect(rotated.previousKid == first && rotated.kid != first)
        try await b.service.loadKeys()
        for (name, h) in [("a", a), ("b", b)] {
            #expect(h.service.keys.jwksJSON(at: h.clock.now).contains(rotated.kid), "not published by \(name)")
            #expect(h.service.keys.activeKid == first)
            #expect(try kid(try await h.issue().accessToken) == first)
        }
        // A millisecond before the activation: still the old key, wherever the keys are loaded again.
        a.clock.set(Date(millisecondsSince1970: activation - 1))
        for h in [a, b] {
            try await h.service.loadKeys()
            #expect(try kid(try await h.issue().accessToken) == first)
        }
        a.clock.set(Date(millisecondsSince1970: activation))
        for h in [a, b] {
            try await h.service.loadKeys()
            #expect(h.service.keys.activeKid == rotated.kid)
        }
        let fromA = try await a.issue().accessToken
        let fromB = try await b.issue().accessToken
        #expect(try kid(fromA) == rotated.kid && kid(fromB) == rotated.kid)
        // Each verifies the other's tokens, and the old key's tokens until it retires.
        _ = try await b.service.verifyAccessToken(VerifyRequest(token: fromA))
        _ = try await a.service.verifyAccessToken(VerifyRequest(token: fromB))
        #expect(b.service.keys.jwksJSON(at: b.clock.now).contains(first))
    }

    @Test("two services rotating keys at once: each new key closes the one before it, and one key is left signing")
    func concurrentKeyRotations() async throws {
        let (a, b) = try await pair()
        for _ in 0..<5 {
            async let fromA = a.service.rotateKeys()
            async let fromB = b.service.rotateKeys()
            _ = try await (fromA, fromB)
        }
        let keys = try await a.service.store.keys()
        #expect(keys.count == 11)
        #expect(keys.filter { $0.signingUntil == nil }.count == 1, "more than one key left signing")
        try await a.service.loadKeys()
        try await b.service.loadKeys()
        #expect(a.service.keys.activeKid == b.service.keys.activeKid)
    }

    @Test("the sweep deletes revocation events older than the retention with the sessions, and keeps newer ones")
    func sweepDeletesOldRevocationEvents() async throws {
        let (a, b) = try await pair()
        let old = try await a.issue(user: "user-old")
        _ = try await a.service.revokeSession(RevokeSessionRequest(sessionID: old.sessionID))
        a.clock.advance(by: 7 * 86_400 - 60)
        let recent = try await b.issue(user: "user-recent")
        _ = try await b.service.revokeSession(RevokeSessionRequest(sessionID: recent.sessionID))
        a.clock.advance(by: 120)
        // The sweep of one instance, as its leader.
        let store = try #require(b.service.store as? PostgresTokenStore)
        #expect(try await store.runIfLeader("sweep") { _ = try await b.service.sweep() })
        let left = try await store.revocationEvents(after: 0, limit: 100)
        #expect(left.map(\.seq) == [2] && left.map(\.sessionID) == [recent.sessionID])
        #expect(try await store.session(id: old.sessionID) == nil)
        // The numbering goes on from where it was.
        let next = try await a.issue(user: "user-next")
        _ = try await a.service.revokeSession(RevokeSessionRequest(sessionID: next.sessionID))
        #expect(try await store.revocationEvents(after: 2, limit: 100).map(\.seq) == [3])
    }

    @Test("the store's errors: a closed pool is unavailable; a failing statement is an internal error, nothing of postgres-nio")
    func errorsAreTranslated() async throws {
        let database = try await PostgresDatabase.make()
        let (store, running) = try database.store()
        try await store.migrate()
        #expect(try await store.keys().isEmpty)
        // A table gone (an operator's mistake): the statement fails on the server.
        try await running.client.query("DROP TABLE token_audit_log")
        do {
            _ = try await store.auditEvents(ListAuditRequest())
            Issue.record("no error")
        } catch let error as RPCError {
            #expect(error.code == .internal && error.message == "internal error")
        }
        // The pool shut down: no connection can be had.
        let (closed, client) = try database.store()
        client.stop()
        await client.stopped()
        do {
            _ = try await closed.keys()
            Issue.record("no error")
        } catch let error as RPCError {
            #expect(error.code == .unavailable && error.message == "the token database is unavailable")
        }
    }
}

/// Values appended from several tasks.
final class Recorder<Value: Sendable>: Sendable {
    private let stored = Mutex<[Value]>([])
    func append(_ value: Value) { stored.withLock { $0.append(value) } }
    var values: [Value] { stored.withLock { $0 } }
}
