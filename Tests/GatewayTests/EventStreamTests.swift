import Foundation
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Prometheus
import Synchronization
import Testing

@testable import Gateway

/// `GET /v1/me/events` over real HTTP against the in-process gateway; the identity service's
/// change log is faked (`FakeChangeLog`), the token service is real.
@Suite struct EventStreamTests {
    /// A live gateway whose change feed is `log`, subscribed and positioned at the log's head.
    static func run(
        configure: @escaping (inout GatewayConfiguration) -> Void = { _ in },
        _ test: @Sendable (Harness, FakeChangeLog) async throws -> Void
    ) async throws {
        let log = FakeChangeLog()
        // Tests publish the feed's heartbeats by hand: no polling of a silent feed unless asked.
        let configure: (inout GatewayConfiguration) -> Void = {
            $0.streams.changeFeedHeartbeat = .seconds(3600)
            configure(&$0)
        }
        try await Harness.run(.live, configure: configure, changeFeed: { log.subscribe() }) { h in
            log.install(on: h.services)
            try await waitUntil("the gateway subscribes to the change feed") { log.subscriptions >= 1 }
            log.heartbeat()
            try await test(h, log)
        }
    }

    static func signIn(_ h: Harness, _ email: String = "ada@example.com") async throws -> (token: String, userID: String) {
        let r = try await h.request(.post, "/v1/sessions", json: #"{"email":"\#(email)","password":"correct horse battery"}"#)
        #expect(r.status == .ok, "\(r.text)")
        let body = try r.object()
        let session = body["session"] as! [String: Any]
        let user = body["user"] as! [String: Any]
        return (session["accessToken"] as! String, user["id"] as! String)
    }

    static func account(_ h: Harness, _ email: String = "ada@example.com") async throws -> (token: String, userID: String) {
        let (user, session) = try await h.signUp(email)
        return (session["accessToken"] as! String, user["id"] as! String)
    }

    static func open(_ h: Harness, _ token: String?, lastEventID: String? = nil, query: String = "") async throws -> StreamClient {
        try await StreamClient.open(port: h.client.port!, token: token, lastEventID: lastEventID, query: query)
    }

    /// Opens a stream and reads its `retry:` block and snapshot.
    static func openLive(_ h: Harness, _ token: String) async throws -> (StreamClient, WireEvent) {
        let stream = try await open(h, token)
        let (status, headers) = try await stream.head()
        #expect(status == 200)
        #expect(headers["content-type"] == "text/event-stream")
        #expect(headers["cache-control"] == "no-store")
        #expect(headers["x-accel-buffering"] == "no")
        #expect(headers["transfer-encoding"] == "chunked")
        let retry = try await stream.next()
        #expect(retry.retry == "3000" && retry.event == nil && retry.data == nil)
        let snapshot = try await stream.next()
        #expect(snapshot.event == "snapshot")
        return (stream, snapshot)
    }

    @Test func snapshotThenLiveChangesOfTheUserOnly() async throws {
        try await Self.run { h, log in
            let (token, userID) = try await Self.account(h)
            let (stream, snapshot) = try await Self.openLive(h, token)
            #expect(snapshot.id == "0")
            #expect((snapshot.json["user"] as? [String: Any])?["id"] as? String == userID)
            #expect(snapshot.json["resync"] as? Bool == false)
            #expect(h.openStreams == 1)

            log.commit(userID, [UserChange.Kind.profile], name: "Ada")
            let change = try await stream.next()
            #expect(change.id == "1")
            #expect(change.event == "change")
            #expect(change.json["changes"] as? [String] == ["profile"])
            #expect((change.json["user"] as? [String: Any])?["displayName"] as? String == "Ada")
            #expect(change.json["occurredAt"] as? String == "2023-11-14T22:13:20.250Z")
            #expect(change.data?.contains("\n") == false)

            log.commit("someone-else")
            log.commit(userID, [UserChange.Kind.settings])
            let next = try await stream.next()
            #expect(next.id == "3", "another user's change is not sent")
            #expect(next.json["changes"] as? [String] == ["settings"])
            #expect(h.metric("gatehouse_event_stream_events_total") == 3)
        }
    }

    /// The stream registers before it reads the log, so changes published during the read are kept;
    /// those the read already covers are not sent twice.
    @Test func resumeReplaysMissedChangesWithoutDuplicates() async throws {
        try await Self.run { h, log in
            let (token, userID) = try await Self.account(h)
            log.commit(userID)
            log.commit(userID)
            try await waitUntil("the feed passed 2") { h.parts.streams.lastDelivered >= 2 || log.head >= 2 }
            h.services.override(IdentityAPI.userChanges) { request in
                let committedBefore = log.commit(userID, publish: false)  // in the read, its event comes late
                let reply = log.userChanges(request)
                log.publish(.changed(committedBefore))
                log.commit(userID, [UserChange.Kind.claims])  // after the read
                try await waitUntil("the late events reached the hub") { h.parts.streams.lastDelivered >= 4 }
                return reply
            }
            let stream = try await Self.open(h, token, lastEventID: "1")
            #expect(try await stream.head().status == 200)
            #expect(try await stream.next().retry == "3000")
            let replayed = try await [stream.next(), stream.next(), stream.next()]
            #expect(replayed.map(\.id) == ["2", "3", "4"])
            #expect(replayed.map(\.event) == ["change", "change", "change"])
            #expect(replayed[2].json["changes"] as? [String] == ["claims"])
            #expect(h.services.lastRequest(IdentityAPI.userChanges) == UserChangesRequest(userID: userID, resume: true, afterSeq: 1, limit: 1000))
            log.commit(userID)
            #expect(try await stream.next().id == "5")
            #expect(stream.pending().isEmpty, "no duplicate")
        }
    }

    @Test func resumeFromAnUnknownPositionIsAResyncSnapshot() async throws {
        try await Self.run { h, log in
            let (token, userID) = try await Self.account(h)
            log.commit(userID)
            let stream = try await Self.open(h, token, query: "?lastEventId=99")
            #expect(try await stream.head().status == 200)
            _ = try await stream.next()
            let snapshot = try await stream.next()
            #expect(snapshot.event == "snapshot")
            #expect(snapshot.id == "1")
            #expect(snapshot.json["resync"] as? Bool == true)
        }
    }

    @Test func gapsAreCaughtUpFromTheLogInOrder() async throws {
        try await Self.run { h, log in
            let (token, userID) = try await Self.account(h)
            let (stream, _) = try await Self.openLive(h, token)
            let before = h.services.calls(to: IdentityAPI.listChanges)  // the head at start (and retries)
            log.commit(userID)
            log.commit(userID, publish: false)  // lost
            log.commit(userID)  // seq 3 after 1: the gateway lists 2 (and 3)
            #expect(try await [stream.next(), stream.next(), stream.next()].map(\.id) == ["1", "2", "3"])
            log.commit(userID, publish: false)  // lost; the heartbeat shows it
            log.heartbeat()
            #expect(try await stream.next().id == "4")
            #expect(h.metric("gatehouse_change_feed_gaps_total") == 2)
            #expect(h.services.calls(to: IdentityAPI.listChanges) == before + 2)
            log.commit(userID)
            #expect(try await stream.next().id == "5")
            #expect(stream.pending().isEmpty)
        }
    }

    /// A catch-up whose missed changes of one user the per-user cap pruned ends only that user's
    /// streams (`resync`); the others get their changes.
    @Test func capPrunedUsersAloneResync() async throws {
        try await Self.run { h, log in
            let (tokenA, a) = try await Self.account(h)
            let (tokenB, b) = try await Self.account(h, "bea@example.com")
            let (streamA, _) = try await Self.openLive(h, tokenA)
            let (streamB, _) = try await Self.openLive(h, tokenB)
            log.commit(a)  // 1
            #expect(try await streamA.next().id == "1")
            log.capPruned([b])
            log.commit(b, publish: false)  // 2, lost (and pruned by the cap)
            log.commit(a, publish: false)  // 3, lost
            log.commit(a)  // 4: the gateway lists after 1
            #expect(try await [streamA.next(), streamA.next()].map(\.id) == ["3", "4"])
            let closed = try await streamB.next()
            #expect(closed.event == "closed" && closed.json["reason"] as? String == "resync" && closed.json["resumable"] as? Bool == true)
            try await streamB.waitForEnd()
            #expect(streamA.pending().isEmpty)
        }
    }

    /// Missed changes that cannot be listed (the identity service is down, or the feed went
    /// back) end the streams with a resumable `resync`: they resume from the log themselves.
    @Test func uncaughtGapsEndStreamsForAResume() async throws {
        try await Self.run { h, log in
            let (token, userID) = try await Self.account(h)
            let (stream, _) = try await Self.openLive(h, token)
            let before = h.services.calls(to: IdentityAPI.listChanges)  // the head at start (and retries)
            h.services.fail(IdentityAPI.listChanges, with: RPCError(.unavailable, "identity down"))
            log.commit(userID, publish: false)
            log.commit(userID)
            let closed = try await stream.next()
            #expect(closed.event == "closed")
            #expect(closed.json["reason"] as? String == "resync")
            #expect(closed.json["resumable"] as? Bool == true)
            try await stream.waitForEnd()
            #expect(h.services.calls(to: IdentityAPI.listChanges) == before + 3)

            log.install(on: h.services)  // the log answers again
            let (again, _) = try await Self.openLive(h, token)
            log.restore(to: 1)
            log.publish(.heartbeat(ChangeFeedHeartbeat(seq: 1)))  // behind the position: the log went back
            #expect(try await again.next().json["reason"] as? String == "resync")
        }
    }

    /// Several identity instances publish the same log: one's heartbeat may come behind a change
    /// another already published. The log's head says nothing went back: streams stay open.
    @Test func aLaggingInstancesHeartbeatIsNoStepBack() async throws {
        try await Self.run { h, log in
            let (token, userID) = try await Self.account(h)
            let (stream, _) = try await Self.openLive(h, token)
            log.commit(userID)
            #expect(try await stream.next().id == "1")
            log.publish(.heartbeat(ChangeFeedHeartbeat(seq: 0)))  // the other instance, not there yet
            log.publish(.changed(UserChange(seq: 1, userID: userID, kinds: [UserChange.Kind.profile], occurredAt: Date())))  // its copy
            log.commit(userID)
            #expect(try await stream.next().id == "2", "the stream goes on, each change once")
            #expect(stream.pending().isEmpty)
        }
    }

    /// A silent feed (a cut event link) is polled while streams are open.
    @Test func aSilentFeedIsPolled() async throws {
        try await Self.run(configure: { $0.streams.changeFeedHeartbeat = .milliseconds(100) }) { h, log in
            let (token, userID) = try await Self.account(h)
            let (stream, _) = try await Self.openLive(h, token)
            log.commit(userID, publish: false)
            log.commit(userID, publish: false)
            #expect(try await [stream.next(), stream.next()].map(\.id) == ["1", "2"])
            #expect(h.services.calls(to: IdentityAPI.listChanges) >= 1)
        }
    }

    /// A settings document stored with line breaks still makes one `data:` line of valid JSON.
    @Test func eventDataIsOneLine() throws {
        let user = User(id: "u1", displayName: "Ada\nLovelace", createdAt: Date(timeIntervalSince1970: 0), settingsJSON: "{\n  \"theme\":\r\n \"dark\"\n}")
        let change = UserChange(seq: 7, userID: "u1", kinds: ["settings"], occurredAt: Date(timeIntervalSince1970: 0.5), user: user)
        let buffer = EventStream.event(id: change.seq, event: "change", data: EventStream.changeData(change))
        let text = String(buffer: buffer)
        let lines = text.components(separatedBy: "\n")
        #expect(lines.count == 5 && lines[0] == "id: 7" && lines[1] == "event: change" && lines[3] == "" && lines[4] == "")
        let json = try #require(JSONSerialization.jsonObject(with: Data(lines[2].dropFirst("data: ".count).utf8)) as? [String: Any])
        let decoded = try #require(json["user"] as? [String: Any])
        #expect(decoded["displayName"] as? String == "Ada\nLovelace")
        #expect((decoded["settings"] as? [String: Any])?["theme"] as? String == "dark")
        #expect(json["occurredAt"] as? String == "1970-01-01T00:00:00.500Z")
    }

    /// A feed never heard from (a wrong events URL) is polled from the log's head.
    @Test func aFeedNeverHeardFromIsPolledFromTheHead() async throws {
        let log = FakeChangeLog()
        try await Harness.run(.live, configure: { $0.streams.changeFeedHeartbeat = .milliseconds(100) }, changeFeed: { AsyncStream { _ in } }) { h in
            log.install(on: h.services)
            let (token, userID) = try await Self.account(h)
            log.commit(userID)  // before the stream: in its snapshot
            let (stream, snapshot) = try await Self.openLive(h, token)
            #expect(snapshot.id == "1")
            log.commit(userID, publish: false)
            #expect(try await stream.next().id == "2")
            #expect(stream.pending().isEmpty)
        }
    }

    /// Streams opened before the feed's first word start the feed's position where they read.
    @Test func theFirstHeartbeatAfterStartCatchesUpOpenStreams() async throws {
        let log = FakeChangeLog()
        try await Harness.run(.live, changeFeed: { log.subscribe() }) { h in
            log.install(on: h.services)
            let (token, userID) = try await Self.account(h)
            try await waitUntil("subscribed") { log.subscriptions >= 1 }
            let (stream, snapshot) = try await Self.openLive(h, token)
            #expect(snapshot.id == "0")
            log.commit(userID, publish: false)  // lost before the gateway heard anything
            log.heartbeat()
            #expect(try await stream.next().id == "1")
        }
    }

    @Test func feedPositionSteps() {
        var position = ChangeFeedPosition()
        func change(_ seq: UInt64) -> ChangeNotice { .changed(UserChange(seq: seq, userID: "u", kinds: ["profile"], occurredAt: Date())) }
        #expect(position.step(change(5)) == .deliver && position.seq == 5)
        #expect(position.step(change(5)) == .drop)
        #expect(position.step(change(6)) == .deliver && position.seq == 6)
        #expect(position.step(change(9)) == .catchUp(through: 8) && position.seq == 6)
        // The catch-up read the log past what the feed announced (11 committed, 9 published):
        // the heartbeat of 9 that was on its way is no step back.
        position.seq = 11
        #expect(position.step(.heartbeat(ChangeFeedHeartbeat(seq: 9))) == .drop && position.seq == 11)
        #expect(position.step(change(10)) == .drop)
        #expect(position.step(.heartbeat(ChangeFeedHeartbeat(seq: 11))) == .drop)
        #expect(position.step(.heartbeat(ChangeFeedHeartbeat(seq: 12))) == .catchUp(through: 12))
        // Below what the feed itself announced: checked against the log's head. A head at or past
        // it: another identity instance published ahead of this one (nothing moves).
        #expect(position.step(.heartbeat(ChangeFeedHeartbeat(seq: 10))) == .checkBehind(beat: 10) && position.seq == 11)
        #expect(position.wentBack(to: 10, head: 12) == .drop && position.seq == 11 && position.announced == 12)
        // A head below it: the log went back (a restored database).
        #expect(position.step(.heartbeat(ChangeFeedHeartbeat(seq: 2))) == .checkBehind(beat: 2))
        #expect(position.wentBack(to: 2, head: 2) == .reset && position.seq == 2 && position.announced == 2)
        var fresh = ChangeFeedPosition()
        #expect(fresh.step(.heartbeat(ChangeFeedHeartbeat(seq: 3))) == .drop && fresh.seq == 3)
    }

    @Test func terminalChangesCloseTheStream() async throws {
        try await Self.run { h, log in
            let (token, userID) = try await Self.account(h)
            let (stream, _) = try await Self.openLive(h, token)
            log.commit(userID, [UserChange.Kind.claims, UserChange.Kind.disabled])
            let closed = try await stream.next()
            #expect(closed.id == "1")
            #expect(closed.event == "closed")
            #expect(closed.json["reason"] as? String == "account_disabled")
            #expect(closed.json["resumable"] as? Bool == false)
            try await stream.waitForEnd()
            try await waitUntil("the stream is gone") { h.openStreams == 0 }
            #expect(h.closedCount("account_disabled") == 1)

            // Resuming after a deletion replays the terminal change.
            log.commit(userID, [UserChange.Kind.deleted])
            let again = try await Self.open(h, token, lastEventID: "1")
            _ = try await again.next()
            let deleted = try await again.next()
            #expect(deleted.id == "2")
            #expect(deleted.json["reason"] as? String == "account_deleted")
            try await again.waitForEnd()
            try await waitUntil("the stream is gone") { h.openStreams == 0 }
        }
    }

    /// A replay that holds a `disabled` undone by a later `enabled` (the user was enabled again
    /// and signed in since) sends both as changes and stays open.
    @Test func aReplayedDisableUndoneLaterDoesNotEndTheStream() async throws {
        try await Self.run { h, log in
            let (token, userID) = try await Self.account(h)
            log.commit(userID, [UserChange.Kind.disabled], publish: false)  // 1
            log.commit(userID, [UserChange.Kind.enabled], publish: false)  // 2
            let stream = try await Self.open(h, token, lastEventID: "0")
            _ = try await stream.next()  // retry:
            let replay = try await [stream.next(), stream.next()]
            #expect(replay.map(\.id) == ["1", "2"], "\(replay)")
            #expect(replay.map(\.event) == ["change", "change"])
            log.commit(userID)  // 3
            #expect(try await stream.next().id == "3")
            #expect(h.openStreams == 1)
        }
    }

    @Test func revocationsCloseTheSessionsStreams() async throws {
        try await Self.run { h, _ in
            let (first, _) = try await Self.account(h)
            let (second, _) = try await Self.signIn(h)
            let (third, _) = try await Self.signIn(h)
            let (a, _) = try await Self.openLive(h, first)
            let (b, _) = try await Self.openLive(h, second)
            let (c, _) = try await Self.openLive(h, third)
            #expect(try await h.request(.delete, "/v1/sessions/current", token: first).status == .noContent)
            let signedOut = try await a.next()
            #expect(signedOut.event == "closed")
            #expect(signedOut.id == nil)
            #expect(signedOut.json["reason"] as? String == "signed_out")
            #expect(signedOut.json["resumable"] as? Bool == false)
            try await a.waitForEnd()
            try await waitUntil("one stream closed") { h.openStreams == 2 }

            #expect(try await h.request(.delete, "/v1/sessions", token: second).status == .noContent)
            for stream in [b, c] {
                let closed = try await stream.next()
                #expect(closed.json["reason"] as? String == "signed_out_everywhere")
            }
            try await waitUntil("all closed") { h.openStreams == 0 }
            let refused = try await Self.open(h, third)
            try await refused.response().expectProblem(401, "session_revoked")
        }
    }

    /// A revocation whose event is lost is still found at the next heartbeat tick.
    @Test func heartbeatsKeepTheStreamAndRecheckRevocations() async throws {
        try await Self.run(configure: {
            $0.streams.heartbeat = .milliseconds(300)
            $0.idleTimeout = .milliseconds(200)
            $0.headTimeout = .milliseconds(200)
        }) { h, log in
            // Connections of their own, opened right before use: the test client's connection,
            // opened when the harness starts, may outlive the 200 ms head timeout before its
            // first request when the machine is busy.
            let signUp = try await RawConnection.open(port: h.client.port!)
            let body = #"{"email":"ada@example.com","password":"correct horse battery"}"#
            try await signUp.send(
                "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            let created = try await signUp.response()
            #expect(created.status == 201)
            let token = try #require((created.json["session"] as? [String: Any])?["accessToken"] as? String)
            let userID = try #require((created.json["user"] as? [String: Any])?["id"] as? String)
            let (stream, _) = try await Self.openLive(h, token)
            // Longer than the connection's idle and head timeouts: the open stream is not cut.
            for _ in 0..<3 { #expect(try await stream.next(comments: true).comment == "keep-alive") }
            log.commit(userID)
            #expect(try await stream.next().id == "1")
            h.services.dropEvents(true)
            let signOut = try await RawConnection.open(port: h.client.port!)
            try await signOut.send("DELETE /v1/sessions/current HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n")
            #expect(try await signOut.response().status == 204)
            let closed = try await stream.next()
            #expect(closed.json["reason"] as? String == "session_revoked")
            try await stream.waitForEnd()
        }
    }

    @Test func tokenExpiryIsAnnouncedThenCloses() async throws {
        try await Self.run(configure: { $0.streams.expiryNotice = .seconds(60) }) { h, log in
            let (token, userID) = try await Self.account(h)
            let (stream, _) = try await Self.openLive(h, token)
            h.clock.advance(by: 830)
            log.commit(userID)
            #expect(try await stream.next().id == "1", "nothing before the notice time")
            h.clock.advance(by: 15)  // 845 s of 900
            let expiring = try await stream.next()
            #expect(expiring.event == "token_expiring")
            #expect(expiring.id == nil)
            let expiresIn = expiring.json["expiresIn"] as? Int ?? -1
            #expect((54...55).contains(expiresIn))
            #expect((expiring.json["expiresAt"] as? String)?.hasSuffix("Z") == true)
            h.clock.advance(by: 60)
            let closed = try await stream.next()
            #expect(closed.json["reason"] as? String == "token_expired")
            #expect(closed.json["resumable"] as? Bool == true)
            try await stream.waitForEnd()
            try await waitUntil("the stream is gone") { h.openStreams == 0 }
            #expect(h.closedCount("token_expired") == 1)
        }
    }

    @Test func capsPerUserAndInTotal() async throws {
        try await Self.run(configure: {
            $0.streams.maxPerUser = 2
            $0.streams.maxStreams = 3
        }) { h, _ in
            let (ada, _) = try await Self.account(h)
            let (bob, _) = try await Self.account(h, "bob@example.com")
            let (first, _) = try await Self.openLive(h, ada)
            let (second, _) = try await Self.openLive(h, ada)
            let (third, _) = try await Self.openLive(h, ada)
            let kicked = try await first.next()
            #expect(kicked.json["reason"] as? String == "too_many_streams")
            try await first.waitForEnd()
            try await waitUntil("two open") { h.openStreams == 2 }
            let (fourth, _) = try await Self.openLive(h, bob)
            #expect(h.openStreams == 3)
            let refused = try await Self.open(h, bob)
            let response = try await refused.response()
            response.expectProblem(503, "too_many_streams")
            #expect(response.headers["retry-after"] != nil)
            #expect(h.openStreams == 3)
            #expect(second.pending().isEmpty && third.pending().isEmpty && fourth.pending().isEmpty)
        }
    }

    @Test func badRequestsGetProblemsAndNoStream() async throws {
        try await Self.run { h, _ in
            let (token, _) = try await Self.account(h)
            for bad in ["abc", "-1", "1.5", "+1", "0x1", "123456789012345678901", "18446744073709551616"] {
                let stream = try await Self.open(h, token, lastEventID: bad)
                try await stream.response().expectProblem(400, "invalid_last_event_id")
            }
            try await Self.open(h, token, query: "?lastEventId=x1").response().expectProblem(400, "invalid_last_event_id")
            try await Self.open(h, nil).response().expectProblem(401, "unauthenticated")
            try await Self.open(h, "not.a.token").response().expectProblem(401, "invalid_token")
            #expect(h.openStreams == 0)
            let ok = try await Self.open(h, token, lastEventID: "18446744073709551615")
            #expect(try await ok.head().status == 200)
        }
    }

    @Test func aClientThatGoesAwayLeavesNothing() async throws {
        try await Self.run { h, log in
            let (token, userID) = try await Self.account(h)
            let (stream, _) = try await Self.openLive(h, token)
            #expect(h.openStreams == 1)
            stream.connection.closeBothWays()
            try await waitUntil("the stream is gone") { h.openStreams == 0 }
            #expect(h.closedCount("disconnected") == 1)
            log.commit(userID)  // nothing to deliver to
            try await waitUntil("delivered") { h.parts.streams.lastDelivered == 1 }
            #expect(h.openStreams == 0)
        }
    }

    /// A client that stops reading: the gateway queues at most `bufferBytes` (plus the socket
    /// buffers), then closes the connection.
    @Test func aSlowReaderIsClosed() async throws {
        try await Self.run(configure: { $0.streams.bufferBytes = 16_384 }) { h, log in
            let (token, userID) = try await Self.account(h)
            let connections = h.parts.admission.open
            let stream = try await StreamClient.open(port: h.client.port!, token: token, receiveBuffer: 4096)
            try await waitUntil("open") { h.openStreams == 1 }
            let name = String(repeating: "x", count: 4000)
            var commits = 0
            while h.openStreams == 1, commits < 20_000 {
                log.commit(userID, name: name)
                commits += 1
                if commits % 100 == 0 {
                    try await waitUntil("delivered") { h.parts.streams.lastDelivered >= UInt64(commits) }
                }
            }
            try await waitUntil("the stream is closed") { h.openStreams == 0 }
            #expect(h.closedCount("slow_reader") == 1)
            #expect(commits < 20_000)
            // The gateway closed the connection (its descriptor is released). The client is not
            // drained: the megabytes in the kernel's buffers would trickle through its 4 KiB
            // window for minutes on a loaded machine.
            try await waitUntil("the connection is closed") { h.parts.admission.open == connections }
            withExtendedLifetime(stream) {}
        }
    }

    /// A big replay (a page of changes) queued at start is allowed on top of the limit: a live
    /// change or a keep-alive that comes before the writer has taken it does not cut off a
    /// client that has had no chance to read yet.
    @Test func aBigReplayIsNotASlowReader() async throws {
        let stream = EventStream(
            id: 1, userID: "u", sessionID: "s", expiresAt: .distantFuture, retryMs: 3000, limit: 16_384,
            metrics: StreamMetrics(registry: PrometheusCollectorRegistry()))
        let user = User(id: "u", displayName: String(repeating: "x", count: 4000), createdAt: Date())
        let replay = (1...50).map { UserChange(seq: UInt64($0), userID: "u", kinds: ["profile"], occurredAt: Date(), user: user) }
        #expect(stream.start(UserChangesResponse(head: 50, changes: replay)) == nil)
        #expect(stream.keepAlive() == nil)
        #expect(stream.offer(UserChange(seq: 51, userID: "u", kinds: ["profile"], occurredAt: Date(), user: user)) == nil)
        #expect(stream.offer(UserChange(seq: 52, userID: "u", kinds: ["profile"], occurredAt: Date(), user: user)) == nil)
        #expect(stream.endReason == nil)
        let chunk = await stream.next()
        let text = chunk.map { String(buffer: $0) } ?? ""
        #expect(text.components(separatedBy: "event: change").count - 1 == 52)
        #expect(!text.contains(": keep-alive"))
        // Past the start, the limit holds again for a client that does not take what is queued.
        for seq in 53...60 { _ = stream.offer(UserChange(seq: UInt64(seq), userID: "u", kinds: ["profile"], occurredAt: Date(), user: user)) }
        #expect(stream.endReason == .slowReader)
    }

    /// A burst past the buffer for a client that reads (a catch-up page) is delivered, not cut off.
    @Test func aBurstForAReadingClientIsDelivered() async throws {
        try await Self.run(configure: { $0.streams.bufferBytes = 16_384 }) { h, log in
            let (token, userID) = try await Self.account(h)
            let (stream, _) = try await Self.openLive(h, token)
            let name = String(repeating: "y", count: 4000)
            for _ in 0..<12 { log.commit(userID, name: name, publish: false) }  // 48 KB in one page
            log.heartbeat()
            for id in 1...12 { #expect(try await stream.next().id == "\(id)") }
            #expect(h.closedCount("slow_reader") == 0)
            #expect(h.openStreams == 1)
        }
    }

    /// At graceful shutdown each stream gets `closed` (`shutting_down`) and the server stops.
    @Test func gracefulShutdownClosesStreams() async throws {
        let kept = Mutex<StreamClient?>(nil)
        try await Self.run { h, _ in
            let (token, _) = try await Self.account(h)
            let (stream, _) = try await Self.openLive(h, token)
            kept.withLock { $0 = stream }
        }
        let stream = try #require(kept.withLock { $0 })
        let closed = try await stream.next()
        #expect(closed.json["reason"] as? String == "shutting_down")
        #expect(closed.json["resumable"] as? Bool == true)
    }
}
