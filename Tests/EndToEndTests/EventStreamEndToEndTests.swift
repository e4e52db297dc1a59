import Foundation
import GatehouseSupport
import GatehouseTestSupport
import Testing

// `GET /v1/me/events` (issue 21) against three separate processes: seeds A25 and A26.

extension Stack {
    /// What a stack with streams needs: the gateway subscribes to the identity service's events,
    /// heartbeats are short (the change feed's 200 ms, a stream's comment every second), and the
    /// `retry:` hint is recognisable; then `extra`.
    func streamEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
        [
            "GATEHOUSE_IDENTITY_EVENTS_URL": environment["GATEHOUSE_IDENTITY_EVENTS_BIND"] ?? "",
            "GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS": "200",
            "GATEHOUSE_STREAM_HEARTBEAT": "1",
            "GATEHOUSE_STREAM_RETRY_MS": "1500",
        ].merging(extra) { $1 }
    }

    /// Starts identity, token and gateway as three processes with `streamEnvironment(extra)`;
    /// returns that environment (to restart a role with it).
    @discardableResult
    func startStreamingRoles(_ extra: [String: String] = [:]) async throws -> [String: String] {
        let environment = streamEnvironment(extra)
        for role in ["identity", "token", "gateway"] { try start(role, environment: environment) }
        try await waitReady()
        return environment
    }

    /// Opens `GET /v1/me/events` on the gateway at `port` (default `httpPort`).
    func openStream(_ bearer: String?, lastEventID: String? = nil, query: String = "", port: Int? = nil, receiveBuffer: Int? = nil) async throws
        -> SSEClient
    {
        try await SSEClient.connect(
            port: port ?? httpPort, path: "/v1/me/events" + query, bearer: bearer, lastEventID: lastEventID, receiveBuffer: receiveBuffer)
    }

    /// `gatehouse_event_streams` of the gateway at `port`: the streams open now (0 while the
    /// gauge has not been written yet; -1 when its line cannot be read).
    func openStreams(port: Int? = nil) async throws -> Int {
        let text = String(decoding: try await request("GET", "/metrics", port: port).body, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("gatehouse_event_streams ") }) else { return 0 }
        return Double(line.split(separator: " ").last ?? "").map { Int($0) } ?? -1
    }

    /// Waits until the gateway at `port` has `count` streams open.
    func waitForOpenStreams(_ count: Int, port: Int? = nil) async throws {
        try await waitUntil("\(count) open streams on the gateway", timeout: .seconds(20), interval: .milliseconds(50)) {
            try await openStreams(port: port) == count
        }
    }

    /// PATCH /v1/me with `body`; expects 200.
    func patchMe(_ bearer: String, _ body: [String: Any], port: Int? = nil) async throws {
        let patched = try await request("PATCH", "/v1/me", json: body, bearer: bearer, port: port)
        guard patched.status == 200 else { throw StackError("PATCH /v1/me answered \(patched.status): \(String(decoding: patched.body, as: UTF8.self))") }
    }

    /// Signs in `email` again: a second device's access and refresh tokens.
    func signInAgain(_ email: String, password: String = "glacier lantern marmalade") async throws -> (access: String, refresh: String) {
        let signIn = try await request("POST", "/v1/sessions", json: ["email": email, "password": password])
        guard signIn.status == 200, let session = signIn.json["session"] as? [String: Any], let access = session["accessToken"] as? String,
            let refresh = session["refreshToken"] as? String
        else { throw StackError("sign-in of \(email) answered \(signIn.status)") }
        return (access, refresh)
    }
}

extension SSEReceivedEvent {
    /// `user` of a snapshot or change.
    var user: [String: Any] { json["user"] as? [String: Any] ?? [:] }
    /// `user.settings.n` of a snapshot or change (the counter the tests patch).
    var n: Int? { (user["settings"] as? [String: Any])?["n"] as? Int }
    /// The `changes` of a change event.
    var changes: [String] { json["changes"] as? [String] ?? [] }
}

@Suite("GET /v1/me/events over three processes")
struct EventStreamEndToEndTests {
    /// Expects `stream` to be an open event stream whose first event is a snapshot of `userID`
    /// (after the `retry:` hint); returns the snapshot.
    @discardableResult
    static func expectSnapshot(_ stream: SSEClient, of userID: String, resync: Bool = false) async throws -> SSEReceivedEvent {
        #expect(stream.status == 200, "\(String(decoding: stream.response.body, as: UTF8.self))")
        #expect(stream.head?.headers["content-type"]?.hasPrefix("text/event-stream") == true)
        #expect(stream.head?.headers["cache-control"] == "no-store")
        #expect(stream.head?.headers["x-accel-buffering"] == "no")
        let snapshot = try await stream.next()
        #expect(stream.retries == [1500], "the retry: hint comes before the first event")
        #expect(snapshot.type == "snapshot", "\(snapshot)")
        #expect(snapshot.seq != nil, "a snapshot's id is the change log's head: \(snapshot)")
        #expect(snapshot.user["id"] as? String == userID)
        #expect(snapshot.json["resync"] as? Bool == resync)
        return snapshot
    }

    /// Expects the next event to be a change of `kinds` with `settings.n == n` (when given),
    /// with an id above `after`; returns it.
    @discardableResult
    static func expectChange(_ stream: SSEClient, _ kinds: [String], n: Int? = nil, after: UInt64? = nil) async throws -> SSEReceivedEvent {
        let event = try await stream.next()
        #expect(event.type == "change", "\(event)")
        #expect(event.changes == kinds, "\(event)")
        if let n { #expect(event.n == n, "\(event)") }
        if let after { #expect((event.seq ?? 0) > after, "ids increase: \(event.id ?? "none") after \(after)") }
        let occurredAt = event.json["occurredAt"] as? String ?? ""
        #expect(ISO8601DateFormatter.withFractionalSeconds.date(from: occurredAt) != nil, "occurredAt \(occurredAt)")
        return event
    }

    /// Expects the next event to be `closed` with `reason` (and `resumable`), then the end of the stream.
    static func expectClosed(_ stream: SSEClient, _ reason: String, resumable: Bool? = false) async throws {
        let event = try await stream.next()
        #expect(event.type == "closed" && event.json["reason"] as? String == reason, "\(event)")
        if let resumable { #expect(event.json["resumable"] as? Bool == resumable, "\(event)") }
        try await stream.waitForClose()
    }

    /// Expects `GET /v1/me/events` with `bearer` to be refused with one problem+json `status`/`code`, no stream.
    static func expectRefused(_ stack: Stack, _ bearer: String?, lastEventID: String? = nil, query: String = "", _ status: Int, _ code: String)
        async throws
    {
        let refused = try await stack.openStream(bearer, lastEventID: lastEventID, query: query)
        #expect(!refused.isEventStream)
        #expect(refused.response.problemMismatches(status, code) == [], "Last-Event-ID \(lastEventID ?? "none") query \(query)")
        #expect(refused.received.isEmpty)
    }

    @Test("A25/A26: two devices of one user; the first event is the user; settings and profile changes reach both, once each, with the same ids; heartbeats")
    func twoDevices() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let u = try await signUpUser(stack, "two@example.com")
        let device2 = try await stack.signInAgain("two@example.com")
        let one = try await stack.openStream(u.access)
        let two = try await stack.openStream(device2.access)
        let first = try await Self.expectSnapshot(one, of: u.id)
        let second = try await Self.expectSnapshot(two, of: u.id)
        #expect(first.user["email"] as? String == "two@example.com")
        #expect(first.seq == second.seq)

        try await stack.patchMe(u.access, ["settings": ["theme": "light"]])
        let seen = try await Self.expectChange(two, ["settings"], after: second.seq)
        #expect((seen.user["settings"] as? [String: Any])?["theme"] as? String == "light")
        #expect(try await Self.expectChange(one, ["settings"]).id == seen.id)

        try await stack.patchMe(device2.access, ["displayName": "Ada"])
        let renamed = try await Self.expectChange(one, ["profile"], after: seen.seq)
        #expect(renamed.user["displayName"] as? String == "Ada")
        #expect(try await Self.expectChange(two, ["profile"]).id == renamed.id)

        // A heartbeat comment within a few seconds (GATEHOUSE_STREAM_HEARTBEAT=1).
        try await two.waitForComments(1)
        #expect(two.comments.first == "keep-alive")
        // Nothing was sent twice: the next event after a last change is that change.
        try await stack.patchMe(u.access, ["settings": ["n": 1]])
        let onOne = try await Self.expectChange(one, ["settings"], n: 1, after: renamed.seq)
        let onTwo = try await Self.expectChange(two, ["settings"], n: 1)
        #expect(onOne.id == onTwo.id)
        #expect(one.pending().isEmpty && two.pending().isEmpty)
    }

    @Test("A25.2: each kind of committed change is one event: anonymous upgraded, email verified, email changed, photo; nothing for a sign-in")
    func eachKindOfChange() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles(["GATEHOUSE_EMAIL_VERIFICATION": "off"])
        let anonymous = try await stack.request("POST", "/v1/accounts/anonymous")
        #expect(anonymous.status == 201)
        let id = try #require((anonymous.json["user"] as? [String: Any])?["id"] as? String)
        let access = try #require((anonymous.json["session"] as? [String: Any])?["accessToken"] as? String)
        let stream = try await stack.openStream(access)
        let snapshot = try await Self.expectSnapshot(stream, of: id)
        #expect(snapshot.user["isAnonymous"] as? Bool == true)

        let password = "glacier lantern marmalade"
        let upgraded = try await stack.request("POST", "/v1/me/upgrade", json: ["email": "kinds@example.com", "password": password], bearer: access)
        #expect(upgraded.status == 200, "\(String(decoding: upgraded.body, as: UTF8.self))")
        let upgrade = try await stream.next()
        #expect(upgrade.type == "change" && upgrade.changes.contains("upgraded") && upgrade.changes.contains("email"), "\(upgrade)")
        #expect(upgrade.changes == upgrade.changes.sorted())
        #expect(upgrade.user["isAnonymous"] as? Bool == false && upgrade.user["email"] as? String == "kinds@example.com")

        #expect(try await stack.request("POST", "/v1/me/email-verification", bearer: access).status == 202)
        try await waitUntil("the verification mail") { try stack.deliveredMails("verify_email").count == 1 }
        let verifyCode = try #require(try stack.deliveredMails("verify_email").first?.code)
        #expect(try await stack.request("POST", "/v1/email-verification/confirm", json: ["code": verifyCode]).status == 204)
        let verified = try await Self.expectChange(stream, ["email_verified"], after: upgrade.seq)
        #expect(verified.user["emailVerified"] as? Bool == true)

        // A sign-in stamps the user but is no change.
        _ = try await stack.signInAgain("kinds@example.com", password: password)
        #expect(try await stack.request("PUT", "/v1/me/email", json: ["email": "kinds-new@example.com"], bearer: access).status == 202)
        try await waitUntil("the email change mail") { try stack.deliveredMails("change_email").count == 1 }
        let changeCode = try #require(try stack.deliveredMails("change_email").first?.code)
        #expect(try await stack.request("POST", "/v1/email-change/confirm", json: ["code": changeCode]).status == 204)
        let changed = try await Self.expectChange(stream, ["email"], after: verified.seq)
        #expect(changed.user["email"] as? String == "kinds-new@example.com")

        try await stack.patchMe(access, ["photoURL": "https://example.com/p.png"])
        let photo = try await Self.expectChange(stream, ["profile"], after: changed.seq)
        #expect(photo.user["photoURL"] as? String == "https://example.com/p.png")
        try await stack.patchMe(access, ["settings": ["n": 1]])
        try await Self.expectChange(stream, ["settings"], n: 1, after: photo.seq)
    }

    @Test("graceful shutdown of the gateway ends its streams with closed shutting_down (resumable)")
    func gracefulShutdown() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let u = try await signUpUser(stack, "shutdown@example.com")
        let stream = try await stack.openStream(u.access)
        try await Self.expectSnapshot(stream, of: u.id)
        try #require(stack.processes["gateway"]).terminate()
        try await Self.expectClosed(stream, "shutting_down", resumable: true)
        await stack.kill("gateway")
    }

    @Test("A25.3: sign-out everywhere ends both devices' streams (closed signed_out_everywhere), and a reconnect is refused 401")
    func signOutEverywhereEndsBoth() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let u = try await signUpUser(stack, "everywhere@example.com")
        let device2 = try await stack.signInAgain("everywhere@example.com")
        let one = try await stack.openStream(u.access)
        let two = try await stack.openStream(device2.access)
        try await Self.expectSnapshot(one, of: u.id)
        try await Self.expectSnapshot(two, of: u.id)

        #expect(try await stack.request("DELETE", "/v1/sessions", bearer: device2.access).status == 204)
        try await Self.expectClosed(one, "signed_out_everywhere")
        try await Self.expectClosed(two, "signed_out_everywhere")
        for token in [u.access, device2.access] { try await Self.expectRefused(stack, token, 401, "session_revoked") }
        try await stack.waitForOpenStreams(0)
    }

    @Test("signing out one device ends only its stream (closed signed_out); the other keeps receiving")
    func signOutOneDevice() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let u = try await signUpUser(stack, "one@example.com")
        let device2 = try await stack.signInAgain("one@example.com")
        let one = try await stack.openStream(u.access)
        let two = try await stack.openStream(device2.access)
        try await Self.expectSnapshot(one, of: u.id)
        try await Self.expectSnapshot(two, of: u.id)

        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: u.access).status == 204)
        try await Self.expectClosed(one, "signed_out")
        try await stack.patchMe(device2.access, ["settings": ["n": 1]])
        try await Self.expectChange(two, ["settings"], n: 1)
        #expect(!two.isClosed)
        try await Self.expectRefused(stack, u.access, 401, "session_revoked")
    }

    @Test("resume after a dropped connection: Last-Event-ID (header or lastEventId) gives exactly the missed changes, in order, then live ones, none twice")
    func resumeAfterDrop() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let u = try await signUpUser(stack, "resume@example.com")
        let stream = try await stack.openStream(u.access)
        try await Self.expectSnapshot(stream, of: u.id)
        try await stack.patchMe(u.access, ["settings": ["n": 1]])
        let last = try await Self.expectChange(stream, ["settings"], n: 1)
        stream.disconnect()
        try await stack.waitForOpenStreams(0)

        for n in 2...4 { try await stack.patchMe(u.access, ["settings": ["n": n]]) }
        let resumed = try await stack.openStream(u.access, lastEventID: last.id)
        #expect(resumed.status == 200)
        var previous = last.seq
        var missed: [SSEReceivedEvent] = []
        for n in 2...4 {
            let event = try await Self.expectChange(resumed, ["settings"], n: n, after: previous)
            previous = event.seq
            missed.append(event)
        }
        #expect(resumed.retries == [1500])
        // Live after the replay, and nothing twice: the next event is the next change.
        try await stack.patchMe(u.access, ["settings": ["n": 5]])
        let live = try await Self.expectChange(resumed, ["settings"], n: 5, after: previous)

        // The same through the query parameter (EventSource cannot set headers on its first connect).
        let byQuery = try await stack.openStream(u.access, query: "?lastEventId=\(last.id ?? "")")
        let replayed = try await byQuery.next(4)
        #expect(replayed.map(\.id) == missed.map(\.id) + [live.id])
        #expect(replayed.map(\.n) == [2, 3, 4, 5])
        // A position past the head of the log: a fresh snapshot that says so.
        let ahead = try await stack.openStream(u.access, lastEventID: "\(UInt64(1) << 60)")
        let snapshot = try await Self.expectSnapshot(ahead, of: u.id, resync: true)
        #expect(snapshot.n == 5)
    }

    @Test("resume after kill -9 of the gateway: changes made meanwhile through a second gateway arrive once, in order, after the restart")
    func resumeAfterGatewayKill() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let environment = stack.streamEnvironment()
        let secondPort = freeLoopbackPort()
        let second = environment.merging(["GATEHOUSE_HTTP_PORT": "\(secondPort)", "GATEHOUSE_ISSUER": stack.baseURL]) { $1 }
        for role in ["identity", "token", "gateway"] { try stack.start(role, environment: environment) }
        try stack.start("gateway", name: "gateway-2", environment: second)
        try await stack.waitReady()
        try await stack.waitReady(port: secondPort)
        let u = try await signUpUser(stack, "killed@example.com")
        let a = try await stack.openStream(u.access)
        let b = try await stack.openStream(u.access, port: secondPort)
        try await Self.expectSnapshot(a, of: u.id)
        try await Self.expectSnapshot(b, of: u.id)
        try await stack.patchMe(u.access, ["settings": ["n": 1]], port: secondPort)
        let last = try await Self.expectChange(a, ["settings"], n: 1)
        try await Self.expectChange(b, ["settings"], n: 1)

        await stack.kill("gateway")
        try await a.waitForClose()
        var meanwhile: [SSEReceivedEvent] = []
        for n in 2...3 {
            try await stack.patchMe(u.access, ["settings": ["n": n]], port: secondPort)
            meanwhile.append(try await Self.expectChange(b, ["settings"], n: n))
        }
        try stack.start("gateway", environment: environment)
        try await stack.waitReady()
        try await stack.patchMe(u.access, ["settings": ["n": 4]], port: secondPort)
        meanwhile.append(try await Self.expectChange(b, ["settings"], n: 4))

        let resumed = try await stack.openStream(u.access, lastEventID: last.id)
        #expect(resumed.status == 200)
        let replayed = try await resumed.next(3)
        #expect(replayed.map(\.type) == ["change", "change", "change"])
        #expect(replayed.map(\.id) == meanwhile.map(\.id))
        #expect(replayed.map(\.n) == [2, 3, 4])
        // The restarted gateway delivers live changes again, once.
        try await stack.patchMe(u.access, ["settings": ["n": 5]])
        let live = try await Self.expectChange(resumed, ["settings"], n: 5, after: replayed.last?.seq)
        #expect(try await Self.expectChange(b, ["settings"], n: 5).id == live.id)
    }

    @Test("a schema-aware client reading the stream (Python, jsonschema) finds every event valid against the OpenAPI document's itemSchema and its data against the event's contentSchema")
    func eventsMatchTheOpenAPIItemSchema() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles(["GATEHOUSE_STREAM_EXPIRY_NOTICE": "60", "GATEHOUSE_STREAM_HEARTBEAT": "1"])
        let u = try await signUpUser(stack, "schema@example.com")
        let script = BuiltProducts.packageRoot.appendingPathComponent("Tests/Interop/sse_schema.py").path
        let progress = stack.dataDir.appendingPathComponent("sse-schema.progress")
        try Data().write(to: progress)
        func seen(_ event: String) -> Bool {
            ((try? String(contentsOf: progress, encoding: .utf8)) ?? "").split(separator: "\n").contains { $0.hasSuffix(" \(event)") || $0.contains(" \(event):") }
        }
        async let reader = runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", script, stack.baseURL, u.access, progress.path])
        try await waitUntil("the reader has the snapshot", timeout: .seconds(30)) { seen("snapshot") }
        try await stack.patchMe(u.access, ["settings": ["n": 1], "displayName": "Schema"])
        try await waitUntil("the reader has the change") { seen("change") }
        // token_expiring (841 s of 900 leaves 59 s, inside the 60 s notice), then closed at expiry.
        stack.advanceClock(by: .seconds(841))
        try await waitUntil("the reader has token_expiring") { seen("token_expiring") }
        stack.advanceClock(by: .seconds(60))
        let result = try await reader
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let seen = result.stdout.split(separator: "\n").map(String.init)
        #expect(seen.filter { $0.hasPrefix("ok ") } == ["ok (retry)", "ok snapshot", "ok change", "ok token_expiring", "ok closed"], "\(seen)")
    }

    @Test("A25.4: token_expiring before the access token expires, closed token_expired (resumable) at expiry; a refreshed token with Last-Event-ID misses nothing")
    func resumeAfterTokenExpiry() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles(["GATEHOUSE_STREAM_EXPIRY_NOTICE": "60"])
        let u = try await signUpUser(stack, "expiry@example.com")
        let stream = try await stack.openStream(u.access)
        try await Self.expectSnapshot(stream, of: u.id)
        try await stack.patchMe(u.access, ["settings": ["n": 1]])
        let last = try await Self.expectChange(stream, ["settings"], n: 1)

        // The access token lives 900 s: 841 s on, it has 59 s left, within the 60 s notice.
        stack.advanceClock(by: .seconds(841))
        let expiring = try await stream.next()
        #expect(expiring.type == "token_expiring", "\(expiring)")
        let expiresIn = expiring.json["expiresIn"] as? Int ?? -1
        #expect((1...60).contains(expiresIn), "\(expiring)")
        let expiresAt = expiring.json["expiresAt"] as? String ?? ""
        let expiry = ISO8601DateFormatter().date(from: expiresAt) ?? ISO8601DateFormatter.withFractionalSeconds.date(from: expiresAt)
        #expect(expiry.map { Int($0.timeIntervalSince1970) } == jwtClaims(u.access)["exp"] as? Int, "expiresAt \(expiresAt) is the token's exp")
        #expect(!stream.isClosed)
        stack.advanceClock(by: .seconds(60))
        try await Self.expectClosed(stream, "token_expired", resumable: true)

        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": u.refresh])
        #expect(refreshed.status == 200)
        let access = try #require((refreshed.json["session"] as? [String: Any])?["accessToken"] as? String)
        for n in 2...3 { try await stack.patchMe(access, ["settings": ["n": n]]) }
        let resumed = try await stack.openStream(access, lastEventID: stream.lastEventID)
        #expect(stream.lastEventID == last.id)
        let two = try await Self.expectChange(resumed, ["settings"], n: 2, after: last.seq)
        try await Self.expectChange(resumed, ["settings"], n: 3, after: two.seq)
    }

    @Test("A25.3: deleting the account ends the stream with closed account_deleted; a reconnect is refused 401")
    func accountDeleted() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let u = try await signUpUser(stack, "deleted@example.com")
        let stream = try await stack.openStream(u.access)
        try await Self.expectSnapshot(stream, of: u.id)
        #expect(try await stack.request("DELETE", "/v1/me", bearer: u.access).status == 204)
        try await Self.expectClosed(stream, "account_deleted")
        try await Self.expectRefused(stack, u.access, 401, "session_revoked")
        try await stack.waitForOpenStreams(0)
    }

    @Test("A10: disabling the user (gatehouse users disable) ends its stream with closed account_disabled; a reconnect is refused 401")
    func accountDisabled() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let u = try await signUpUser(stack, "disabled@example.com")
        let stream = try await stack.openStream(u.access)
        try await Self.expectSnapshot(stream, of: u.id)
        let disabled = try await runUsersCommand(stack, ["disable", u.id])
        #expect(disabled.status == 0, "\(disabled.stderr)")
        try await Self.expectClosed(stream, "account_disabled")
        let again = try await stack.openStream(u.access)
        #expect(again.status == 401 && !again.isEventStream, "\(String(decoding: again.response.body, as: UTF8.self))")
    }

    @Test("migrating an anonymous user into an existing account ends the anonymous user's stream with closed migrated; the existing account's stream stays open")
    func migratedAway() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let b = try await signUpUser(stack, "bea@example.com")
        let anonymous = try await stack.request("POST", "/v1/accounts/anonymous")
        let aID = try #require((anonymous.json["user"] as? [String: Any])?["id"] as? String)
        let aAccess = try #require((anonymous.json["session"] as? [String: Any])?["accessToken"] as? String)
        let aStream = try await stack.openStream(aAccess)
        let bStream = try await stack.openStream(b.access)
        try await Self.expectSnapshot(aStream, of: aID)
        try await Self.expectSnapshot(bStream, of: b.id)

        let signIn = try await stack.request(
            "POST", "/v1/sessions", json: ["email": "bea@example.com", "password": "glacier lantern marmalade", "allowMigration": true], bearer: aAccess)
        #expect(signIn.status == 200, "\(String(decoding: signIn.body, as: UTF8.self))")
        try await Self.expectClosed(aStream, "migrated")
        try await Self.expectRefused(stack, aAccess, 401, "session_revoked")
        // B's stream stays open: it gets B's next change (after any change the sign-in made to B).
        try await stack.patchMe(b.access, ["settings": ["n": 1]])
        var event = try await bStream.next()
        while event.n != 1, event.type == "change" { event = try await bStream.next() }
        #expect(event.type == "change" && event.n == 1, "\(event)")
    }

    @Test("a malformed Last-Event-ID (header or lastEventId) is refused 400 invalid_last_event_id before any stream")
    func malformedLastEventID() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let u = try await signUpUser(stack, "malformed@example.com")
        for bad in ["abc", "-1", "+5", "1.5", "1e3", "12 34", "0x10", "18446744073709551616", "123456789012345678901"] {
            try await Self.expectRefused(stack, u.access, lastEventID: bad, 400, "invalid_last_event_id")
            let escaped = bad.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? bad
            try await Self.expectRefused(stack, u.access, query: "?lastEventId=\(escaped)", 400, "invalid_last_event_id")
        }
        try await stack.waitForOpenStreams(0)
        // The largest id there can be is well formed: a resync snapshot.
        try await Self.expectSnapshot(try await stack.openStream(u.access, lastEventID: "18446744073709551615"), of: u.id, resync: true)
    }

    @Test("A26.2: no token, a bad token, a revoked token: one problem+json 401, no stream")
    func badToken() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        try await Self.expectRefused(stack, nil, 401, "unauthenticated")
        try await Self.expectRefused(stack, "x.y.z", 401, "invalid_token")
        let u = try await signUpUser(stack, "bad@example.com")
        let tampered = String(u.access.dropLast(2)) + (u.access.hasSuffix("AA") ? "BB" : "AA")
        try await Self.expectRefused(stack, tampered, 401, "invalid_token")
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: u.access).status == 204)
        try await Self.expectRefused(stack, u.access, 401, "session_revoked")
        let refused = try await stack.openStream(nil)
        #expect(refused.head?.headers["www-authenticate"] != nil)
        try await stack.waitForOpenStreams(0)
    }

    @Test("caps: past the per-user cap the user's oldest stream is closed (too_many_streams) and the new one opens; past the total cap 503 too_many_streams with Retry-After")
    func tooManyStreams() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles(["GATEHOUSE_STREAM_MAX": "3", "GATEHOUSE_STREAM_MAX_PER_USER": "2"])
        let a = try await signUpUser(stack, "cap-a@example.com")
        let b = try await signUpUser(stack, "cap-b@example.com")
        let a1 = try await stack.openStream(a.access)
        try await Self.expectSnapshot(a1, of: a.id)
        let a2 = try await stack.openStream(a.access)
        try await Self.expectSnapshot(a2, of: a.id)
        let a3 = try await stack.openStream(a.access)
        try await Self.expectSnapshot(a3, of: a.id)
        try await Self.expectClosed(a1, "too_many_streams", resumable: nil)
        #expect(!a2.isClosed)
        try await stack.waitForOpenStreams(2)

        let b1 = try await stack.openStream(b.access)
        try await Self.expectSnapshot(b1, of: b.id)
        try await stack.waitForOpenStreams(3)
        let refused = try await stack.openStream(b.access)
        #expect(refused.response.problemMismatches(503, "too_many_streams") == [])
        #expect(Int(refused.head?.headers["retry-after"] ?? "") != nil, "\(refused.head?.headers ?? [:])")
        #expect(!a2.isClosed && !a3.isClosed && !b1.isClosed)

        // A place freed by a client that went away is free again.
        b1.disconnect()
        try await stack.waitForOpenStreams(2)
        try await Self.expectSnapshot(try await stack.openStream(b.access), of: b.id)
    }

    @Test("A25.5: clients that disconnect leave no stream behind (the gauge is back at 0), and changes after that go nowhere")
    func disconnectLeavesNothing() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let a = try await signUpUser(stack, "leave-a@example.com")
        let b = try await signUpUser(stack, "leave-b@example.com")
        #expect(try await stack.openStreams() == 0)
        var streams: [SSEClient] = []
        for token in [a.access, a.access, b.access] {
            let stream = try await stack.openStream(token)
            try await Self.expectSnapshot(stream, of: token == a.access ? a.id : b.id)
            streams.append(stream)
        }
        try await stack.waitForOpenStreams(3)
        streams[0].disconnect()
        try await stack.waitForOpenStreams(2)
        // A change to a user with one stream left reaches it.
        try await stack.patchMe(a.access, ["settings": ["n": 1]])
        try await Self.expectChange(streams[1], ["settings"], n: 1)
        for stream in streams.dropFirst() { stream.disconnect() }
        try await stack.waitForOpenStreams(0)
        try await stack.patchMe(a.access, ["settings": ["n": 2]])
        try await stack.patchMe(b.access, ["settings": ["n": 2]])
        #expect(try await stack.request("GET", "/readyz").status == 200)
        try await stack.waitForOpenStreams(0)
    }

    @Test("resuming from a position older than GATEHOUSE_CHANGE_LOG_RETENTION gets a fresh snapshot with resync; from a kept one, exactly the changes after it")
    func resumeAfterRetention() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let environment = try await stack.startStreamingRoles(["GATEHOUSE_CHANGE_LOG_RETENTION": "60"])
        let u = try await signUpUser(stack, "retained@example.com")
        let stream = try await stack.openStream(u.access)
        let snapshot = try await Self.expectSnapshot(stream, of: u.id)
        try await stack.patchMe(u.access, ["settings": ["n": 1]])
        let first = try await Self.expectChange(stream, ["settings"], n: 1)
        stream.disconnect()

        // Two minutes on, a second change; the identity service restarts and prunes at start:
        // the first change is past the 60 s retention, the second is kept.
        stack.advanceClock(by: .seconds(120))
        try await stack.patchMe(u.access, ["settings": ["n": 2]])
        await stack.kill("identity")
        try stack.start("identity", environment: environment)
        try await stack.waitReady()

        // The prune at start runs beside serving: wait until it has (a resume from the old
        // position then answers a snapshot).
        try await waitUntil("the restarted identity service pruned its log") {
            let probe = try await stack.openStream(u.access, lastEventID: snapshot.id)
            defer { probe.disconnect() }
            return try await probe.next().type == "snapshot"
        }
        let stale = try await stack.openStream(u.access, lastEventID: snapshot.id)
        let fresh = try await Self.expectSnapshot(stale, of: u.id, resync: true)
        #expect(fresh.n == 2)
        let kept = try await stack.openStream(u.access, lastEventID: first.id)
        let second = try await Self.expectChange(kept, ["settings"], n: 2, after: first.seq)
        #expect(second.id == fresh.id)
        #expect(kept.pending().isEmpty)
    }

    @Test("a slow reader whose buffer fills is closed (the gateway does not grow); it resumes with Last-Event-ID and misses nothing")
    func slowReaderClosed() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles(["GATEHOUSE_STREAM_BUFFER_BYTES": "16384"])
        let u = try await signUpUser(stack, "slow@example.com")
        let slow = try await stack.openStream(u.access, receiveBuffer: 4096)
        let snapshot = try await Self.expectSnapshot(slow, of: u.id)
        let fast = try await stack.openStream(u.access)
        try await Self.expectSnapshot(fast, of: u.id)
        try await stack.waitForOpenStreams(2)
        // Big changes (12 KB of settings each) that the slow reader never reads, until the gateway
        // drops it (its queue passes 16 KiB once the kernel's buffers are full).
        let blob = String(repeating: "x", count: 12_000)
        var patched = 0
        while try await stack.openStreams() == 2, patched < 400 {
            patched += 1
            try await stack.patchMe(u.access, ["settings": ["blob": blob, "n": patched]])
        }
        try await stack.waitForOpenStreams(1)
        #expect(patched < 400, "the slow stream was never closed")
        let metrics = String(decoding: try await stack.request("GET", "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("gatehouse_event_streams_closed_total{reason=\"slow_reader\"} 1"), "\(metrics.split(separator: "\n").filter { $0.contains("closed_total") })")
        var delivered: [SSEReceivedEvent] = []
        for n in 1...patched { delivered.append(try await Self.expectChange(fast, ["settings"], n: n)) }
        #expect(Set(delivered.map(\.id)).count == patched)

        // The slow client resumes from the last event it processed (the snapshot; the megabytes
        // still in the kernel's buffers would trickle through its 4 KiB window for minutes): it
        // gets every change, in order, once.
        slow.disconnect()
        let resumed = try await stack.openStream(u.access, lastEventID: snapshot.id)
        let rest = try await resumed.next(patched)
        #expect(rest.map(\.id) == delivered.map(\.id))
        try await stack.patchMe(u.access, ["settings": ["n": 0]])
        try await Self.expectChange(resumed, ["settings"], n: 0, after: delivered.last?.seq)
    }
}

extension ISO8601DateFormatter {
    /// `2026-11-25T12:00:00.123Z`.
    static var withFractionalSeconds: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
