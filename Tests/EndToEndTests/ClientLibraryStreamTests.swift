import Foundation
import GatehouseClient
import GatehouseTestSupport
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A URL protocol that holds each `POST /v1/sessions/refresh` to a gateway port the test
/// registered until the test opens that port's gate, then sends it on (every other request at once).
final class HeldRefreshProtocol: URLProtocol {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var gates: [Int: Gate] = [:]
    private var forwarding: Task<Void, Never>?

    /// A closed gate for the refreshes sent to `port`.
    static func hold(port: Int) -> Gate {
        let gate = Gate()
        lock.withLock { gates[port] = gate }
        return gate
    }

    /// A URL session whose requests go through this protocol.
    static func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [HeldRefreshProtocol.self]
        return URLSession(configuration: configuration)
    }

    /// Only the refreshes: every other request (event streams too) goes out as it is.
    override class func canInit(with request: URLRequest) -> Bool { request.url?.path == "/v1/sessions/refresh" }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        var request = self.request
        if request.httpBody == nil, let stream = request.httpBodyStream {
            var body = Data()
            stream.open()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while case let count = stream.read(&buffer, maxLength: buffer.count), count > 0 { body.append(buffer, count: count) }
            stream.close()
            request.httpBodyStream = nil
            request.httpBody = body
        }
        let forwarded = request
        let gate = forwarded.url?.path == "/v1/sessions/refresh" ? Self.lock.withLock { Self.gates[forwarded.url?.port ?? 0] } : nil
        // URLProtocol and its client are not Sendable; this protocol's task is their only user.
        nonisolated(unsafe) let loader = self
        let client = self.client
        forwarding = Task {
            await gate?.wait()
            do {
                let (data, response) = try await URLSession.shared.data(for: forwarded)
                client?.urlProtocol(loader, didReceive: response, cacheStoragePolicy: .notAllowed)
                client?.urlProtocol(loader, didLoad: data)
                client?.urlProtocolDidFinishLoading(loader)
            } catch {
                client?.urlProtocol(loader, didFailWithError: error)
            }
        }
    }

    override func stopLoading() { forwarding?.cancel() }
}

/// The client library's live updates (`userUpdates()`, `authState`) against three processes
/// whose gateway streams `GET /v1/me/events` (see EventStreamEndToEndTests for the server's side).
extension ClientLibraryTests {
    /// Waits until `seen` has `count` values, or the stream ended.
    static func waitForValues<Element: Sendable>(_ seen: Seen<Element>, _ count: Int, _ what: String) async throws {
        try await waitUntil(what, timeout: .seconds(20)) { seen.values.count >= count || seen.ended }
    }

    @Test("userUpdates(): the first value is the user now; a change made by a second client of the same user arrives; cancelling the consuming task ends it promptly and closes the connection")
    func userUpdatesLive() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let phone = Self.client(stack)
        let user = try await phone.signUp(email: "live@example.com", password: Self.password).user
        let tablet = Self.client(stack)
        _ = try await tablet.signIn(email: "live@example.com", password: Self.password)

        let updates = Self.consume(phone.userUpdates())
        try await Self.waitForValues(updates.seen, 1, "the first value")
        let first = try #require(updates.seen.values.first, "ended: \(String(describing: updates.seen.error))")
        #expect(first.id == user.id && first.email == "live@example.com" && first.displayName == nil)
        try await stack.waitForOpenStreams(1)

        let renamed = try await tablet.updateProfile(ProfileUpdate(displayName: "Changed elsewhere"))
        try await Self.waitForValues(updates.seen, 2, "the change made on the tablet")
        #expect(updates.seen.values.count == 2, "ended: \(String(describing: updates.seen.error))")
        #expect(updates.seen.values.last == renamed)
        #expect(await phone.currentUser == renamed, "the stream keeps the client's user current")

        let cancelled = ContinuousClock.now
        updates.task.cancel()
        try await waitUntil("the consuming task ends", timeout: .seconds(5)) { updates.seen.ended }
        #expect(ContinuousClock.now - cancelled < .seconds(5))
        #expect(updates.seen.error == nil, "a cancelled stream ends without an error")
        try await stack.waitForOpenStreams(0)
        #expect(await phone.currentState == .signedIn(renamed), "cancelling the stream keeps the session")
    }

    @Test("userUpdates() reconnects by itself after the gateway is killed (kill -9) and started again, resuming with Last-Event-ID: a change made while it was down arrives once, and the stream goes on")
    func updatesResumeAfterGatewayRestart() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        let environment = try await stack.startStreamingRoles()
        let phone = Self.client(stack)
        let user = try await phone.signUp(email: "gateway-restart@example.com", password: Self.password).user
        let key = try await stack.adminKey()
        let updates = Self.consume(phone.userUpdates())
        try await Self.waitForValues(updates.seen, 1, "the first value")
        try await stack.waitForOpenStreams(1)

        await stack.kill("gateway")
        // While it is down, an administrator renames the user (the identity role's admin listener).
        let renamed = try await stack.request(
            "PATCH", "/admin/v1/users/\(user.id)", json: ["displayName": "While down"], bearer: key, port: stack.adminPort)
        #expect(renamed.status == 200, "\(String(decoding: renamed.body, as: UTF8.self))")
        try stack.start("gateway", environment: environment)
        try await stack.waitReady()

        try await Self.waitForValues(updates.seen, 2, "the change made while the gateway was down")
        #expect(!updates.seen.ended, "the stream reconnected: \(String(describing: updates.seen.error))")
        #expect(updates.seen.values.last?.displayName == "While down")
        let later = try await phone.updateProfile(ProfileUpdate(displayName: "After the restart"))
        try await Self.waitForValues(updates.seen, 3, "a change after the reconnection")
        #expect(updates.seen.values.map(\.displayName) == [nil, "While down", "After the restart"], "each change once, in order")
        #expect(updates.seen.values.last == later)
        updates.task.cancel()
    }

    @Test("userUpdates() survives the access token's expiry: at token_expiring the client refreshes once, at closed token_expired it reconnects with the new token, and a later change arrives on the same stream, once")
    func updatesSurviveTokenExpiry() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles(["GATEHOUSE_STREAM_EXPIRY_NOTICE": "60"])
        let phone = Self.client(stack)
        let user = try await phone.signUp(email: "expiry@example.com", password: Self.password).user
        let tablet = Self.client(stack)
        _ = try await tablet.signIn(email: "expiry@example.com", password: Self.password)
        let original = try await phone.accessToken()

        let updates = Self.consume(phone.userUpdates())
        try await Self.waitForValues(updates.seen, 1, "the first value")
        #expect(updates.seen.values.first?.id == user.id, "ended: \(String(describing: updates.seen.error))")

        // The access token lives 900 s: 841 s on it has 59 s left, within the 60 s notice.
        stack.advanceClock(by: .seconds(841))
        try await waitUntil("the client refreshes at token_expiring", timeout: .seconds(20)) { await phone.refreshCount >= 1 || updates.seen.ended }
        #expect(await phone.refreshCount == 1)
        // At expiry the server closes the stream (token_expired); the client reconnects.
        stack.advanceClock(by: .seconds(60))
        // Past the gateway's 10 s leeway for expiry too.
        stack.advanceClock(by: .seconds(15))
        #expect(try await Self.refused(stack, original), "the first token has expired on the server")

        // The tablet's token expired on the server too, not by its own clock: its call is refused,
        // refreshed once and sent again.
        let renamed = try await tablet.updateProfile(ProfileUpdate(displayName: "After expiry"))
        #expect(await tablet.refreshCount == 1)
        try await Self.waitForValues(updates.seen, 2, "the change after the expiry")
        #expect(!updates.seen.ended, "the stream is still open: \(String(describing: updates.seen.error))")
        #expect(updates.seen.values.count == 2 && updates.seen.values.last == renamed, "\(updates.seen.values.map(\.displayName))")
        #expect(await phone.refreshCount == 1, "the reconnection used the token refreshed at token_expiring")
        try await stack.waitForOpenStreams(1)
        updates.task.cancel()
    }

    @Test("a revoked session signs the device out: client B's signOutEverywhere ends client A's userUpdates() with streamClosed (signed_out_everywhere or session_revoked), A's authState yields .signedOut and its store empties; a third client's next call throws sessionEnded")
    func revokedSessionSignsOut() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let storeA = InMemoryTokenStore()
        let a = Self.client(stack, store: storeA)
        let user = try await a.signUp(email: "revoked@example.com", password: Self.password).user
        let b = Self.client(stack)
        _ = try await b.signIn(email: "revoked@example.com", password: Self.password)
        let c = Self.client(stack)
        _ = try await c.signIn(email: "revoked@example.com", password: Self.password)

        let states = Self.consume(a.authState)
        defer { states.task.cancel() }
        let updates = Self.consume(a.userUpdates())
        try await Self.waitForValues(updates.seen, 1, "A's first value")
        #expect(updates.seen.values.first?.id == user.id, "ended: \(String(describing: updates.seen.error))")
        try await Self.waitForValues(states.seen, 1, "A's first state")
        // The state carries the user as last seen: the stream's snapshot may be newer (lastSignInAt).
        #expect(states.seen.values.first.map { $0 == .signedIn($0.user ?? user) && $0.user?.id == user.id } == true, "\(states.seen.values)")
        try await stack.waitForOpenStreams(1)

        try await b.signOutEverywhere()
        #expect(await b.currentState == .signedOut)
        #expect(await Self.failure { try await b.reloadUser() } == .notSignedIn)

        try await waitUntil("A's stream ends", timeout: .seconds(20)) { updates.seen.ended }
        let closed = updates.seen.error as? GatehouseError
        guard case .streamClosed(let reason, _)? = closed else {
            Issue.record("A's stream ended with \(String(describing: updates.seen.error))")
            return
        }
        #expect(["signed_out_everywhere", "session_revoked"].contains(reason), "\(reason)")
        let sentence = closed?.errorDescription ?? ""
        #expect(!sentence.isEmpty)
        try await waitUntil("A's authState says signed out", timeout: .seconds(10)) { states.seen.values.last == .signedOut }
        let seen = states.seen.values
        #expect(seen.last == .signedOut && seen.filter { $0 == .signedOut }.count == 1, "\(seen)")
        #expect(seen.dropLast().allSatisfy { $0 == .signedIn($0.user ?? user) && $0.user?.id == user.id }, "\(seen)")
        #expect(await a.currentState == .signedOut)
        #expect(try storeA.load() == nil)
        // A already forgot the session, and says why; C learns of the revocation at its next call.
        #expect(await Self.failure { try await a.reloadUser() } == .sessionEnded(code: reason))
        let ended = await Self.failure { try await c.reloadUser() }
        guard case .sessionEnded? = ended else {
            Issue.record("expected sessionEnded: \(String(describing: ended))")
            return
        }
        #expect(await c.currentState == .signedOut)
        #expect(await Self.failure { try await c.reloadUser() } == ended, "later calls say the same, until a sign-in")
        _ = try await c.signIn(email: "revoked@example.com", password: Self.password)
        #expect(try await c.reloadUser().id == user.id)
        await c.signOut()
        #expect(await Self.failure { try await c.reloadUser() } == .notSignedIn, "a sign-out of its own is just signed out")
    }

    @Test("a refresh that ends after the session changed neither brings back the user as it was before a live change, nor replaces the saved session of a newer sign-in")
    func lateRefreshKeepsNewerState() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startStreamingRoles()
        let gate = HeldRefreshProtocol.hold(port: stack.httpPort)
        let clock = ClientClock()
        let store = InMemoryTokenStore()
        var configuration = GatehouseClient.Configuration(requestTimeout: 15, reconnectDelay: 0.2, maximumReconnectDelay: 2)
        configuration.now = { clock.now }
        let device = GatehouseClient(
            baseURL: URL(string: stack.baseURL)!, tokenStore: store, urlSession: HeldRefreshProtocol.session(), configuration: configuration)
        let user = try await device.signUp(email: "late@example.com", password: Self.password).user
        let laptop = Self.client(stack)
        _ = try await laptop.signIn(email: "late@example.com", password: Self.password)
        let updates = Self.consume(device.userUpdates())
        defer { updates.task.cancel() }
        try await Self.waitForValues(updates.seen, 1, "the first value")
        #expect(updates.seen.values.first?.id == user.id, "ended: \(String(describing: updates.seen.error))")

        // 1. A refresh held in flight while the user changes elsewhere: the change arrives.
        clock.advance(by: 901)
        let firstRefresh = Task { try await device.accessToken() }
        try await gate.waitForWaiters(1)
        let renamed = try await laptop.updateProfile(ProfileUpdate(displayName: "Renamed meanwhile"))
        try await Self.waitForValues(updates.seen, 2, "the change")
        #expect(await device.currentUser == renamed)
        gate.open()
        _ = try await firstRefresh.value
        #expect(await device.refreshCount == 1)
        #expect(await device.currentUser == renamed, "the refresh keeps the user as it is now")
        #expect(try store.load()?.user == renamed)

        // 2. A refresh held in flight while the device signs in to another account.
        let other = try await Self.client(stack).signUp(email: "other@example.com", password: Self.password).user
        let secondGate = HeldRefreshProtocol.hold(port: stack.httpPort)
        clock.advance(by: 901)
        let secondRefresh = Task { try await device.accessToken() }
        try await secondGate.waitForWaiters(1)
        let signedIn = try await device.signIn(email: "other@example.com", password: Self.password)
        #expect(signedIn.user.id == other.id)
        let adopted = try #require(try store.load())
        secondGate.open()
        _ = await secondRefresh.result
        #expect(await device.currentUser?.id == other.id)
        #expect(try store.load() == adopted, "the late refresh of the previous session leaves the saved session alone")
        #expect(try await device.reloadUser().id == other.id)
    }
}
