import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import GRDB
import IdentityCore
@testable import IdentityService
import Logging
import PostgresNIO
import ProtoCodec
import RPCRouting
import SQLiteSupport
import Testing

/// Review findings on the change log (issue 21): a row whose `user` JSON does not decode, the
/// cost of the per-user cap's prune, and `secure_delete` for the prune's deletes.
@Suite("Identity: change log robustness (bad rows, bounded cap prune, secure delete)")
struct ChangeLogRobustnessTests {
    func sqlite(_ h: Harness) throws -> SQLiteUserStore { try #require(h.store as? SQLiteUserStore) }

    func anonymous(_ h: Harness) async throws -> String {
        try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user.id
    }

    func rename(_ h: Harness, _ id: String, _ name: String) async throws {
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, displayName: name))
    }

    @Test("a change whose user JSON does not decode is sent without its user (kinds kept): the publisher, its heartbeat, listChanges and userChanges move past it", arguments: StoreKind.kept)
    func undecodableRow(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let a = try await anonymous(h)
        let store = h.logStorage
        let sink = RecordingEventSink()
        let publisher = try await ChangeLogPublisher.start(store: store, events: sink, logger: Logger(label: "test"))
        for n in 1...3 { try await rename(h, a, "a\(n)") }  // 1...3
        try await h.executeRaw(
            sqlite: #"UPDATE user_changes SET user_json = '{"id": 7, "email": ' WHERE seq = 2"#,
            postgres: #"UPDATE user_changes SET user_json = '{"id": 7, "email": ' WHERE seq = 2"#)
        let run = Task { await publisher.run(heartbeat: .milliseconds(20)) }
        defer { run.cancel() }
        func beats() throws -> [UInt64] {
            try sink.events.filter { $0.topic == IdentityAPI.Topic.changeFeedHeartbeat }
                .map { try ProtobufDecoder().decode(ChangeFeedHeartbeat.self, from: $0.payload).seq }
        }
        try await waitUntil("the publisher past the bad row") { publisher.position == 3 }
        try await waitUntil("a heartbeat at 3") { try beats().last == 3 }
        let published = try sink.decoded(as: UserChange.self).filter { $0.topic == IdentityAPI.Topic.userChanged }.map(\.event)
        #expect(published.map(\.seq) == [1, 2, 3])
        #expect(published.map(\.kinds) == [["profile"], ["profile"], ["profile"]])
        #expect(published.map { $0.user?.displayName } == ["a1", nil, "a3"])
        #expect(published[1].userID == a)

        let listed = try await h.caller.call(IdentityAPI.listChanges, ListChangesRequest(afterSeq: 0))
        #expect(listed.changes.map(\.seq) == [1, 2, 3] && listed.changes.map { $0.user?.displayName } == ["a1", nil, "a3"])
        let resumed = try await h.caller.call(IdentityAPI.userChanges, UserChangesRequest(userID: a, resume: true, afterSeq: 0))
        #expect(!resumed.resync && resumed.changes.map(\.seq) == [1, 2, 3] && resumed.changes[1].user == nil)
        #expect(resumed.changes[1].kinds == ["profile"])
    }

    @Test("the cap prune checks only users changed since its last run: a user over a (lowered) cap whose changes all predate it is not rescanned; a user who crosses the cap after a run is pruned; on SQLite the look-ups search the primary key and the (user_id, seq) index", arguments: StoreKind.kept)
    func boundedCapPrune(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let store = h.logStorage
        let a = try await anonymous(h)
        let b = try await anonymous(h)
        for n in 0..<12 { try await rename(h, a, "a-\(n)") }  // 1...12
        for n in 0..<8 { try await rename(h, b, "b-\(n)") }  // 13...20
        #expect(try await store.pruneChanges(before: .distantPast, maxPerUser: 10) == 2)  // a: 1, 2
        // Nothing changed since: no user is looked at again, whatever the cap.
        #expect(try await store.pruneChanges(before: .distantPast, maxPerUser: 5) == 0)
        #expect(try await store.listChanges(afterSeq: 0, limit: 100).changes.count == 18)
        // b crosses the cap of 10 after the run: the next run prunes it, and only it.
        for n in 8..<12 { try await rename(h, b, "b-\(n)") }  // 21...24
        #expect(try await store.pruneChanges(before: .distantPast, maxPerUser: 10) == 2)  // b: 13, 14
        let log = try await store.listChanges(afterSeq: 0, limit: 100)
        #expect(log.changes.map(\.seq) == Array(3...12) + Array(15...24))
        #expect(log.resyncUserIDs.sorted() == [a, b].sorted())
        let resyncB = try await h.caller.call(IdentityAPI.userChanges, UserChangesRequest(userID: b, resume: true, afterSeq: 13))
        #expect(resyncB.resync)
        let resumedB = try await h.caller.call(IdentityAPI.userChanges, UserChangesRequest(userID: b, resume: true, afterSeq: 14))
        #expect(!resumedB.resync && resumedB.changes.map(\.seq) == Array(15...24))
        #expect(try await store.pruneChanges(before: .distantPast, maxPerUser: 10) == 0)

        guard let store = store as? SQLiteUserStore else { return }
        let plans = try await store.files.pool.read { db -> [[String]] in
            try [SQLiteUserStore.changedUsersSQL, SQLiteUserStore.capThroughSQL].map { sql in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: [0, 10]).map { $0["detail"] as String }
            }
        }
        #expect(plans[0].contains { $0.hasPrefix("SEARCH user_changes USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") }, "\(plans[0])")
        #expect(plans[1].contains { $0.hasPrefix("SEARCH user_changes USING COVERING INDEX user_changes_user (user_id=?)") }, "\(plans[1])")
        #expect(!plans.joined().contains { $0.hasPrefix("SCAN") }, "\(plans)")
    }

    @Test("retention and cap deletes of the change log run with secure_delete on (freed bytes overwritten, like every deletion of a user)")
    func pruneSecureDelete() async throws {
        let h = try await Harness()
        defer { h.cleanup() }
        let store = try sqlite(h)
        let a = try await anonymous(h)
        let b = try await anonymous(h)
        for n in 0..<5 { try await rename(h, a, "old-\(n)") }  // 1...5 at t
        h.clock.advance(by: 120)
        for n in 0..<6 { try await rename(h, b, "new-\(n)") }  // 6...11 at t + 120 s
        // A user deletion first: it turns secure_delete off again when it is done.
        let c = try await anonymous(h)
        _ = try await h.caller.call(IdentityAPI.deleteUser, UserIDRequest(userID: c))
        // Each deletion from the log, on the writer's connection, records the pragma's value then.
        try await store.files.pool.write { db in
            try db.execute(sql: """
                CREATE TEMP TABLE deletes (secure INTEGER NOT NULL);
                CREATE TEMP TRIGGER record_secure_delete AFTER DELETE ON main.user_changes
                BEGIN INSERT INTO deletes SELECT secure_delete FROM pragma_secure_delete; END;
                """)
            #expect(try Int.fetchOne(db, sql: "PRAGMA secure_delete") == 0)
        }
        #expect(try await store.pruneChanges(before: h.clock.now.addingTimeInterval(-60), maxPerUser: 3, batch: 2) == 8)
        let recorded = try await store.files.pool.write { db in try Int.fetchAll(db, sql: "SELECT secure FROM temp.deletes") }
        #expect(recorded.count == 8 && recorded.allSatisfy { $0 == 1 }, "\(recorded)")
        #expect(try await store.files.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA secure_delete") } == 0)
    }
}
