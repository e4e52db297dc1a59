import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import IdentityCore
@testable import IdentityService
import Logging
import ProtoCodec
import RPCRouting
import Testing

/// Reading, publishing and pruning the change log (issue 21): `identity.userChanges` and
/// `identity.listChanges`, the serial publisher of `user.changed` and `identity.heartbeat`, the
/// prune by retention and per-user cap with its watermarks; on SQLite and PostgreSQL.
@Suite("Identity: change feed (publisher, userChanges, listChanges, prune)")
struct ChangeFeedTests {
    func storage(_ h: Harness) throws -> any IdentityStorage { h.logStorage }

    func anonymous(_ h: Harness) async throws -> String {
        try await h.caller.call(IdentityAPI.signInAnonymously, SignInAnonymouslyRequest()).user.id
    }

    func rename(_ h: Harness, _ id: String, _ name: String) async throws {
        _ = try await h.caller.call(IdentityAPI.updateProfile, UpdateProfileRequest(userID: id, displayName: name))
    }

    func changes(_ h: Harness, _ request: UserChangesRequest) async throws -> UserChangesResponse {
        try await h.caller.call(IdentityAPI.userChanges, request)
    }

    @Test("the publisher starts at the head (no history again), then publishes every change once, in seq order without gaps, under concurrent writes; its heartbeat carries the newest published seq", arguments: StoreKind.kept)
    func publishesInOrder(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let users = try await [anonymous(h), anonymous(h), anonymous(h), anonymous(h)]
        try await rename(h, users[0], "history")
        let sink = RecordingEventSink()
        let publisher = try await ChangeLogPublisher.start(store: storage(h), events: sink, logger: Logger(label: "test"))
        #expect(publisher.position == 1)
        let run = Task { await publisher.run(heartbeat: .seconds(3600)) }
        defer { run.cancel() }
        try await waitUntil("first heartbeat") { sink.topics.contains(IdentityAPI.Topic.changeFeedHeartbeat) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, user) in users.enumerated() {
                group.addTask { for n in 0..<25 { try await rename(h, user, "u\(index)-\(n)") } }
            }
            try await group.waitForAll()
        }
        try await waitUntil("100 changes published") { sink.topics.filter { $0 == IdentityAPI.Topic.userChanged }.count >= 100 }
        let published = try sink.decoded(as: UserChange.self).filter { $0.topic == IdentityAPI.Topic.userChanged }.map(\.event)
        #expect(published.map(\.seq) == Array(2...101))
        #expect(published.allSatisfy { $0.kinds == ["profile"] && $0.user?.id == $0.userID })
        #expect(publisher.position == 101)
        // Each user's last published change is its last name.
        for (index, user) in users.enumerated() {
            #expect(published.last { $0.userID == user }?.user?.displayName == "u\(index)-24")
        }
        #expect(sink.topics.filter { $0 == IdentityAPI.Topic.userChanged }.count == 100)
    }

    @Test("heartbeats come every interval at the newest published seq; a change is published before the heartbeat that counts it", arguments: StoreKind.kept)
    func heartbeat(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let id = try await anonymous(h)
        let sink = RecordingEventSink()
        let publisher = try await ChangeLogPublisher.start(store: storage(h), events: sink, logger: Logger(label: "test"))
        let run = Task { await publisher.run(heartbeat: .milliseconds(20)) }
        defer { run.cancel() }
        func beats() throws -> [UInt64] {
            try sink.events.filter { $0.topic == IdentityAPI.Topic.changeFeedHeartbeat }
                .map { try ProtobufDecoderBox.decode(ChangeFeedHeartbeat.self, $0.payload).seq }
        }
        try await waitUntil("three heartbeats at 0") { try beats().count >= 3 }
        #expect(try beats().allSatisfy { $0 == 0 })
        try await rename(h, id, "Ann")
        try await waitUntil("a heartbeat at 1") { try beats().last == 1 }
        let topics = sink.topics
        let change = try #require(topics.firstIndex(of: IdentityAPI.Topic.userChanged))
        #expect(topics[..<change].allSatisfy { $0 == IdentityAPI.Topic.changeFeedHeartbeat })
    }

    @Test("userChanges: a snapshot at the head; a resume gets the user's changes after its position; in the future, pruned, or more than the limit → a resync snapshot; bad input invalid_argument; unknown user user_not_found", arguments: StoreKind.kept)
    func userChangesCases(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let a = try await anonymous(h)
        let b = try await anonymous(h)
        try await rename(h, a, "a1")  // 1
        try await rename(h, b, "b1")  // 2
        try await rename(h, a, "a2")  // 3

        let snapshot = try await changes(h, UserChangesRequest(userID: a))
        #expect(snapshot.head == 3 && snapshot.user?.displayName == "a2" && snapshot.changes.isEmpty && !snapshot.resync)

        let resumed = try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 1))
        #expect(resumed.head == 3 && resumed.user == nil && !resumed.resync && resumed.changes.map(\.seq) == [3])
        let upToDate = try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 3))
        #expect(upToDate.changes.isEmpty && upToDate.user == nil && !upToDate.resync)

        let future = try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 99))
        #expect(future.resync && future.user?.displayName == "a2" && future.head == 3 && future.changes.isEmpty)
        let tooMany = try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 0, limit: 1))
        #expect(tooMany.resync && tooMany.user?.id == a)
        let exactly = try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 0, limit: 2))
        #expect(!exactly.resync && exactly.changes.map(\.seq) == [1, 3])

        await expectCode(.invalidArgument) { try await changes(h, UserChangesRequest(userID: a, limit: 1001)) }
        await expectCode(.invalidArgument) { try await changes(h, UserChangesRequest(userID: a, limit: -1)) }
        await expectCode(.invalidArgument) { try await changes(h, UserChangesRequest(userID: "not an id!")) }
        await expectCode(.userNotFound) { try await changes(h, UserChangesRequest(userID: "AAAAAAAAAAAAAAAAAAAAAA")) }
        await expectCode(.userNotFound) { try await changes(h, UserChangesRequest(userID: "AAAAAAAAAAAAAAAAAAAAAA", resume: true)) }

        // The per-user cap prunes a's oldest: a resume before it resyncs; b is untouched.
        for n in 0..<12 { try await rename(h, a, "a-\(n)") }  // 4...15
        #expect(try await storage(h).pruneChanges(before: .distantPast, maxPerUser: 10) == 4)  // 1, 3, 4, 5
        let pruned = try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 3))
        #expect(pruned.resync && pruned.user?.displayName == "a-11" && pruned.head == 15)
        let kept = try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 5))
        #expect(!kept.resync && kept.changes.map(\.seq) == Array(6...15))
        // A gateway catching up from before the cap's prune learns that only a must start again;
        // from after it, nobody.
        let listed = try await storage(h).listChanges(afterSeq: 1, limit: 100)
        #expect(!listed.truncated && listed.resyncUserIDs == [a] && listed.changes.first?.seq == 2)
        let later = try await storage(h).listChanges(afterSeq: 5, limit: 100)
        #expect(!later.truncated && later.resyncUserIDs.isEmpty)
        let other = try await changes(h, UserChangesRequest(userID: b, resume: true, afterSeq: 1))
        #expect(!other.resync && other.changes.map(\.seq) == [2])
    }

    @Test("userChanges of a deleted user: a resume before its terminal change gets that change (deleted or migrated); from it or after, user_not_found; a snapshot user_not_found; the head stays when the newest changes are pruned", arguments: StoreKind.kept)
    func terminal(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let a = try await anonymous(h)
        try await rename(h, a, "a1")  // 1
        _ = try await h.caller.call(IdentityAPI.deleteUser, UserIDRequest(userID: a))  // 2: deleted, 1 removed
        let replay = try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 1))
        #expect(replay.head == 2 && replay.user == nil && replay.changes.map(\.kinds) == [["deleted"]] && replay.changes.first?.seq == 2)
        await expectCode(.userNotFound) { try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 2)) }
        await expectCode(.userNotFound) { try await changes(h, UserChangesRequest(userID: a)) }
        // Pruned empty: the head is still 2, so a fresh snapshot's position stays after every id given.
        let b = try await anonymous(h)
        h.clock.advance(by: 86_400 * 365 * 30)
        try await ChangeLogPrune(store: storage(h), clock: h.clock.wallClock, retention: 60, maxPerUser: 1000).prune()
        let empty = try await storage(h).listChanges(afterSeq: 0, limit: 10)
        #expect(empty.changes.isEmpty && empty.head == 2 && empty.truncated)
        #expect(try await changes(h, UserChangesRequest(userID: b)).head == 2)
    }

    @Test("listChanges: pages in seq order with the head; truncated once retention pruned changes after the position; limits checked", arguments: StoreKind.kept)
    func listAndRetention(_ kind: StoreKind) async throws {
        let h = try await Harness(kind: kind)
        defer { h.cleanup() }
        let a = try await anonymous(h)
        for n in 0..<5 { try await rename(h, a, "old-\(n)") }  // 1...5 at t
        h.clock.advance(by: 120)
        for n in 0..<3 { try await rename(h, a, "new-\(n)") }  // 6...8 at t + 120 s
        let page = try await h.caller.call(IdentityAPI.listChanges, ListChangesRequest(afterSeq: 2, limit: 4))
        #expect(page.changes.map(\.seq) == [3, 4, 5, 6] && page.head == 8 && !page.truncated)
        #expect(try await h.caller.call(IdentityAPI.listChanges, ListChangesRequest(afterSeq: 8)).changes.isEmpty)
        await expectCode(.invalidArgument) { try await h.caller.call(IdentityAPI.listChanges, ListChangesRequest(afterSeq: 0, limit: 1001)) }

        let prune = ChangeLogPrune(store: try storage(h), clock: h.clock.wallClock, retention: 60, maxPerUser: 1000)
        // In batches of two changes per transaction: all five go, the watermark at the last.
        #expect(try await storage(h).pruneChanges(before: h.clock.now.addingTimeInterval(-60), maxPerUser: 1000, batch: 2) == 5)
        #expect(try await prune.prune() == 0)
        let after = try await h.caller.call(IdentityAPI.listChanges, ListChangesRequest(afterSeq: 2))
        #expect(after.truncated && after.changes.map(\.seq) == [6, 7, 8])
        let current = try await h.caller.call(IdentityAPI.listChanges, ListChangesRequest(afterSeq: 5))
        #expect(!current.truncated && current.changes.map(\.seq) == [6, 7, 8])
        let resumed = try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 4))
        #expect(resumed.resync && resumed.user?.displayName == "new-2")
        #expect(!(try await changes(h, UserChangesRequest(userID: a, resume: true, afterSeq: 5))).resync)
    }
}

/// Decodes a protobuf payload (the tests' shorthand).
enum ProtobufDecoderBox {
    static func decode<T: Decodable>(_ type: T.Type, _ payload: [UInt8]) throws -> T { try ProtobufDecoder().decode(T.self, from: payload) }
}
