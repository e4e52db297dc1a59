import Foundation
import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import GatehouseTestSupport
import RPCRouting
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 24 §2–§3 over real processes: two identity instances and two token instances on one
/// PostgreSQL database, two gateways that each know every instance.
@Suite("Several identity and token instances on PostgreSQL")
struct SeveralInstancesEndToEndTests {
    /// The processes of one topology: `identity-a`, `identity-b`, `token-a`, `token-b`,
    /// `gateway-a`, `gateway-b`.
    final class Topology: @unchecked Sendable {
        let stack = Stack()
        let tokenRPC: [String: String]
        let identityRPC: [String: String]
        let gatewayPorts: [String: Int]
        let tokenEnvironment: [String: [String: String]]
        let identityEnvironment: [String: [String: String]]
        let gatewayEnvironment: [String: String]

        init(databaseURL: String, rpcTimeoutMs: Int = 2000, extra: [String: String] = [:], identityExtra: [String: String] = [:]) throws {
            let rpcA = "tcp://127.0.0.1:\(freeLoopbackPort())", rpcB = "tcp://127.0.0.1:\(freeLoopbackPort())"
            let eventsA = "tcp://127.0.0.1:\(freeLoopbackPort())", eventsB = "tcp://127.0.0.1:\(freeLoopbackPort())"
            let idA = "tcp://127.0.0.1:\(freeLoopbackPort())", idB = "tcp://127.0.0.1:\(freeLoopbackPort())"
            let idEventsA = "tcp://127.0.0.1:\(freeLoopbackPort())", idEventsB = "tcp://127.0.0.1:\(freeLoopbackPort())"
            tokenRPC = ["token-a": rpcA, "token-b": rpcB]
            identityRPC = ["identity-a": idA, "identity-b": idB]
            gatewayPorts = ["gateway-a": freeLoopbackPort(), "gateway-b": freeLoopbackPort()]
            try FileManager.default.createDirectory(at: stack.dataDir, withIntermediateDirectories: true)
            let kek = stack.dataDir.appendingPathComponent("shared-kek")
            try Data(TokenTestRandom.bytes(32)).write(to: kek)
            var tokens: [String: [String: String]] = [:]
            for (name, rpc, events) in [("token-a", rpcA, eventsA), ("token-b", rpcB, eventsB)] {
                tokens[name] = [
                    // Nothing shared on disk: each instance has its own folder.
                    "GATEHOUSE_DATA_DIR": stack.dataDir.appendingPathComponent(name).path,
                    "GATEHOUSE_TOKEN_BIND": rpc, "GATEHOUSE_TOKEN_EVENTS_BIND": events,
                    "GATEHOUSE_TOKEN_DATABASE_URL": databaseURL, "GATEHOUSE_KEY_ENCRYPTION_KEY_FILE": kek.path,
                    "GATEHOUSE_KEY_SYNC_INTERVAL": "1", "GATEHOUSE_DATABASE_POOL_SIZE": "4", "GATEHOUSE_REVOCATION_HEARTBEAT_MS": "200",
                    "GATEHOUSE_PUBLIC_URL": Self.publicURL, "GATEHOUSE_RPC_TIMEOUT_MS": "\(rpcTimeoutMs)",
                    "GATEHOUSE_IDENTITY_URL": "\(idA),\(idB)",
                ].merging(extra) { $1 }
            }
            tokenEnvironment = tokens
            var identities: [String: [String: String]] = [:]
            for (name, rpc, events) in [("identity-a", idA, idEventsA), ("identity-b", idB, idEventsB)] {
                identities[name] = [
                    "GATEHOUSE_DATA_DIR": stack.dataDir.appendingPathComponent(name).path,
                    "GATEHOUSE_IDENTITY_BIND": rpc, "GATEHOUSE_IDENTITY_EVENTS_BIND": events,
                    "GATEHOUSE_IDENTITY_DATABASE_URL": databaseURL, "GATEHOUSE_DATABASE_POOL_SIZE": "6",
                    "GATEHOUSE_TOKEN_URL": "\(rpcA),\(rpcB)", "GATEHOUSE_PUBLIC_URL": Self.publicURL,
                    "GATEHOUSE_RPC_TIMEOUT_MS": "\(rpcTimeoutMs)", "GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS": "200",
                    // Each its own admin listener (they share a host here).
                    "GATEHOUSE_ADMIN_PORT": "\(freeLoopbackPort())",
                ].merging(identityExtra) { $1 }
            }
            identityEnvironment = identities
            gatewayEnvironment = [
                "GATEHOUSE_IDENTITY_URL": "\(idA),\(idB)", "GATEHOUSE_IDENTITY_EVENTS_URL": "\(idEventsA),\(idEventsB)",
                "GATEHOUSE_TOKEN_URL": "\(rpcA),\(rpcB)", "GATEHOUSE_TOKEN_EVENTS_URL": "\(eventsA),\(eventsB)",
                "GATEHOUSE_REVOCATION_HEARTBEAT_MS": "200", "GATEHOUSE_PUBLIC_URL": Self.publicURL,
                "GATEHOUSE_RPC_TIMEOUT_MS": "\(rpcTimeoutMs)",
            ]
        }

        /// What a load balancer in front of both gateways would be: the issuer every role agrees on.
        static let publicURL = "https://auth.several.test"

        func start() async throws {
            for name in ["identity-a", "identity-b"] { try startIdentity(name) }
            for name in ["token-a", "token-b"] { try startToken(name) }
            for (name, port) in gatewayPorts {
                try stack.start("gateway", name: name, environment: gatewayEnvironment.merging(["GATEHOUSE_HTTP_PORT": "\(port)"]) { $1 }, captureLog: true)
            }
            for port in gatewayPorts.values { try await stack.waitReady(port: port) }
        }

        func startToken(_ name: String) throws {
            try stack.start("token", name: name, environment: tokenEnvironment[name]!, captureLog: true)
        }

        func startIdentity(_ name: String) throws {
            try stack.start("identity", name: name, environment: identityEnvironment[name]!, captureLog: true)
        }

        /// A client of one identity instance alone.
        func identityClient(_ name: String) throws -> RPCClient {
            try RPCClient(configuration: .init(endpoint: identityRPC[name]!, defaultTimeout: .seconds(5)))
        }

        var a: Int { gatewayPorts["gateway-a"]! }
        var b: Int { gatewayPorts["gateway-b"]! }

        /// A client of one token instance alone.
        func tokenClient(_ name: String) throws -> RPCClient {
            try RPCClient(configuration: .init(endpoint: tokenRPC[name]!, defaultTimeout: .seconds(5)))
        }
    }

    static let password = "correct horse battery"

    /// Signs up a new user through the gateway at `port`: its access and refresh tokens.
    static func signUp(_ stack: Stack, port: Int) async throws -> (access: String, refresh: String) {
        let r = try await stack.request(
            "POST", "/v1/accounts", json: ["email": "several-\(UUID().uuidString.prefix(8))@example.com", "password": password], port: port)
        #expect(r.status == 201, "\(String(decoding: r.body, as: UTF8.self))")
        let session = try #require(r.json["session"] as? [String: Any])
        return (try #require(session["accessToken"] as? String), try #require(session["refreshToken"] as? String))
    }

    static func refresh(_ stack: Stack, _ token: String, port: Int) async throws -> Stack.Response {
        try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": token], port: port)
    }

    static func session(_ response: Stack.Response) -> (access: String, refresh: String)? {
        guard response.status == 200, let s = response.json["session"] as? [String: Any], let access = s["accessToken"] as? String,
            let refresh = s["refreshToken"] as? String
        else { return nil }
        return (access, refresh)
    }

    static func kid(_ jwt: String) -> String? {
        guard let data = Base64URL.decode(jwt.split(separator: ".")[0]),
            let header = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return header["kid"] as? String
    }

    @Test("a session made through one gateway is served by the other; one refresh token raced through both rotates once; a sign-out reaches both gateways")
    func sharedSessions() async throws {
        let topology = try Topology(databaseURL: try await Self.freshDatabase())
        defer { topology.stack.stopAll() }
        try await topology.start()
        let stack = topology.stack
        var tokens = try await Self.signUp(stack, port: topology.a)
        let me = try await stack.request("GET", "/v1/me", bearer: tokens.access, port: topology.b)
        #expect(me.status == 200, "\(String(decoding: me.body, as: UTF8.self))")

        // The same refresh token through both gateways at once, each spreading over both token
        // instances: one rotation, the other answered from the grace window with the same successor.
        for round in 0..<20 {
            let presented = tokens.refresh
            async let first = Self.refresh(stack, presented, port: topology.a)
            async let second = Self.refresh(stack, presented, port: topology.b)
            let answers = [try await first, try await second]
            let sessions = answers.compactMap(Self.session)
            #expect(sessions.count == 2, "round \(round): \(answers.map { String(decoding: $0.body, as: UTF8.self) })")
            #expect(Set(sessions.map(\.refresh)).count == 1, "round \(round): two different successors")
            tokens = try #require(sessions.first)
        }
        // The same races straight at the two instances (the gateways' round robins could line up
        // and send both copies to one instance): each instance is asked once per round.
        let a = try topology.tokenClient("token-a"), b = try topology.tokenClient("token-b")
        for round in 0..<20 {
            let presented = tokens.refresh
            async let first = a.call(TokenAPI.refresh, RefreshRequest(refreshToken: presented))
            async let second = b.call(TokenAPI.refresh, RefreshRequest(refreshToken: presented))
            let (x, y) = (try await first, try await second)
            #expect(x.refreshToken == y.refreshToken && x.sessionID == y.sessionID, "round \(round): two different successors")
            tokens = (x.accessToken, x.refreshToken)
        }
        await a.close()
        await b.close()
        // The session survived every race: nothing was taken for reuse.
        #expect(try await stack.request("GET", "/v1/me", bearer: tokens.access, port: topology.a).status == 200)

        // Signed out through gateway A (on whichever instance): gateway B refuses the token as soon
        // as the event arrives, from either instance.
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: tokens.access, port: topology.a).status == 204)
        try await waitUntil("gateway B refusing the signed-out token", timeout: .seconds(10)) {
            let r = try await stack.request("GET", "/v1/me", bearer: tokens.access, port: topology.b)
            return r.status == 401 && r.json["code"] as? String == "session_revoked"
        }
    }

    @Test("a key rotated on one instance is published by both before either signs with it, then both sign with it")
    func coordinatedRotation() async throws {
        let topology = try Topology(databaseURL: try await Self.freshDatabase())
        defer { topology.stack.stopAll() }
        try await topology.start()
        let stack = topology.stack
        let a = try topology.tokenClient("token-a"), b = try topology.tokenClient("token-b")
        let oldKid = try #require(Self.kid(try await Self.signUp(stack, port: topology.a).access))
        let rotated = try await a.call(TokenAPI.rotateKeys, RotateKeysRequest())
        #expect(rotated.previousKid == oldKid && rotated.kid != oldKid)
        // Instance B publishes the new key within one sync interval (1 s), and neither signs with it.
        try await waitUntil("token-b publishing the rotated key", timeout: .seconds(10)) {
            try await b.call(TokenAPI.jwks, Empty()).json.contains(rotated.kid)
        }
        #expect(try await a.call(TokenAPI.jwks, Empty()).json == (try await b.call(TokenAPI.jwks, Empty()).json))
        for port in [topology.a, topology.b, topology.a, topology.b] {
            #expect(Self.kid(try await Self.signUp(stack, port: port).access) == oldKid)
        }
        // Past the activation (two intervals and a second) both sign with it.
        stack.advanceClock(by: .seconds(4))
        try await waitUntil("both instances signing with the rotated key", timeout: .seconds(10)) {
            var kids: Set<String?> = []
            for port in [topology.a, topology.b, topology.a, topology.b] { kids.insert(Self.kid(try await Self.signUp(stack, port: port).access)) }
            return kids == [rotated.kid]
        }
        #expect(try await a.call(TokenAPI.jwks, Empty()).json == (try await b.call(TokenAPI.jwks, Empty()).json))
        await a.close()
        await b.close()
    }

    @Test("kill -9 of one token instance under refresh load: the other keeps serving and no acknowledged refresh is lost")
    func killOneInstance() async throws {
        let topology = try Topology(databaseURL: try await Self.freshDatabase())
        defer { topology.stack.stopAll() }
        try await topology.start()
        let stack = topology.stack
        var users: [(access: String, refresh: String)] = []
        for i in 0..<6 { users.append(try await Self.signUp(stack, port: i % 2 == 0 ? topology.a : topology.b)) }
        let acknowledged = Counter()
        let failures = Counter()
        // Each user refreshes in a loop through alternating gateways, keeping the last token the
        // server acknowledged (a failed refresh is tried again with the same token, as an app does).
        let loops = users.enumerated().map { index, start in
            Task { () -> String in
                var current = start.refresh
                for step in 0..<60 {
                    let r = try await Self.refresh(stack, current, port: (index + step) % 2 == 0 ? topology.a : topology.b)
                    if let next = Self.session(r) {
                        current = next.refresh
                        acknowledged.add()
                    } else {
                        #expect([503, 504].contains(r.status), "refresh answered \(r.status) \(String(decoding: r.body, as: UTF8.self))")
                        failures.add()
                    }
                }
                return current
            }
        }
        try await waitUntil("refreshes acknowledged before the kill") { acknowledged.value >= 60 }
        await stack.kill("token-a")
        var last: [String] = []
        for loop in loops { last.append(try await loop.value) }
        // Every user's last acknowledged token still refreshes, on the instance left.
        for (i, token) in last.enumerated() {
            let r = try await Self.refresh(stack, token, port: i % 2 == 0 ? topology.a : topology.b)
            #expect(r.status == 200, "user \(i): the last acknowledged refresh token answered \(r.status) \(String(decoding: r.body, as: UTF8.self))")
        }
        #expect(acknowledged.value + failures.value == 6 * 60)
        #expect(failures.value <= 12, "\(failures.value) refreshes failed around the kill")
        // New sessions too, through both gateways; and the instance, back, takes calls again.
        _ = try await Self.signUp(stack, port: topology.a)
        _ = try await Self.signUp(stack, port: topology.b)
        try topology.startToken("token-a")
        let a = try topology.tokenClient("token-a")
        try await waitUntil("token-a back") { (try? await a.call(TokenAPI.jwks, Empty())) != nil }
        await a.close()
    }

    @Test("PostgreSQL restarted under refresh and sign-up load: calls fail fast with 503, recover on their own, and no acknowledged refresh or sign-up is lost")
    func databaseRestart() async throws {
        let server = try await PostgresServer.start()
        // A long RPC deadline: a refusal that came only from the deadline would take 10 s. A refresh
        // committed just before the crash may have lost its answer: the app's retry after the
        // outage is a grace replay only within the grace window, so the window covers the outage
        // (on a loaded machine a crash, restart and reconnection can take longer than the default 10 s).
        let topology = try Topology(
            databaseURL: server.url(database: try await server.createDatabase()), rpcTimeoutMs: 10_000, extra: ["GATEHOUSE_REFRESH_GRACE": "300"])
        defer { topology.stack.stopAll() }
        // What a failure shows: the sign-ups' answers in order, and every service's log.
        let timeline = Accounts()
        func recordLogs() {
            Issue.record("sign-ups: \(timeline.all.suffix(60).joined(separator: "\n"))")
            for name in ["identity-a", "identity-b", "token-a", "token-b", "gateway-a", "gateway-b"] {
                Issue.record("\(name): \(topology.stack.log(of: name).suffix(8000))")
            }
        }
        do {
            try await topology.start()
            let stack = topology.stack
            var users: [String] = []
            for i in 0..<4 { users.append(try await Self.signUp(stack, port: i % 2 == 0 ? topology.a : topology.b).refresh) }
            // Refresh load through both gateways for the whole test: each user keeps the last token
            // the server acknowledged (a refused refresh is tried again with the same token).
            let acknowledged = Counter(), refused = Counter(), slowest = Slowest()
            let stop = Flag()
            let loops = users.enumerated().map { index, first in
                Task { () -> String in
                    var current = first
                    var step = 0
                    while !stop.isSet {
                        step += 1
                        let started = ContinuousClock.now
                        let r = try await Self.refresh(stack, current, port: (index + step) % 2 == 0 ? topology.a : topology.b)
                        if let next = Self.session(r) {
                            current = next.refresh
                            acknowledged.add()
                        } else {
                            #expect(r.status == 503, "refresh answered \(r.status) \(String(decoding: r.body, as: UTF8.self))")
                            slowest.record(ContinuousClock.now - started)
                            refused.add()
                            try await Task.sleep(for: .milliseconds(20))
                        }
                    }
                    return current
                }
            }
            // And sign-ups through both gateways (identity writes on the same database): each
            // acknowledged one must sign in afterwards.
            // (A sign-up need not be refused at all: on a quick restart the one in flight may just
            // wait for its connection. The refreshes show the refusals.)
            let signedUp = Accounts(), slowestSignUp = Slowest()
            let signUps = Task { () -> Void in
                var step = 0
                while !stop.isSet {
                    step += 1
                    let email = "restart-\(step)@example.com"
                    let t0 = ContinuousClock.now
                    let r = try await stack.request(
                        "POST", "/v1/accounts", json: ["email": email, "password": Self.password], port: step % 2 == 0 ? topology.a : topology.b)
                    timeline.add("\(Date()) sign-up \(step): \(r.status) in \(ContinuousClock.now - t0)")
                    if r.status == 201 {
                        signedUp.add(email)
                    } else {
                        // A sign-up that committed just before the crash may have lost its answer: its retry is 409.
                        #expect([503, 409].contains(r.status), "sign-up answered \(r.status) \(String(decoding: r.body, as: UTF8.self))")
                        slowestSignUp.record(ContinuousClock.now - t0)
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
            }
            try await waitUntil("refreshes before the crash") { acknowledged.value >= 40 }
            await server.crash()
            // While it is down: refused with 503, quickly (the RPC deadline is 10 s), never a 500.
            try await waitUntil("refreshes refused while the database is down") { refused.value >= 20 }
            let before = acknowledged.value
            try await server.startAgain()
            // Back on their own within seconds.
            let signedUpBefore = signedUp.all.count
            try await waitUntil("refreshes acknowledged again", timeout: .seconds(30), interval: .milliseconds(100)) { acknowledged.value >= before + 40 }
            try await waitUntil("sign-ups acknowledged again", timeout: .seconds(30), interval: .milliseconds(100)) {
                signedUp.all.count >= signedUpBefore + 5
            }
            stop.set()
            try await signUps.value
            #expect(slowestSignUp.value < .seconds(3), "a sign-up's refusal took \(slowestSignUp.value)")
            // No acknowledged sign-up was lost: each signs in, through both gateways. One identity
            // instance may still be finding the database back (its pool retries connecting with a
            // backoff) while the other already serves: a 503 is tried again, within seconds.
            var signInsFailed = 0
            let recovered = ContinuousClock.now + .seconds(15)
            for (i, email) in signedUp.all.enumerated() {
                var r = try await stack.request(
                    "POST", "/v1/sessions", json: ["email": email, "password": Self.password], port: i % 2 == 0 ? topology.a : topology.b)
                while r.status == 503 && ContinuousClock.now < recovered {
                    try await Task.sleep(for: .milliseconds(100))
                    r = try await stack.request(
                        "POST", "/v1/sessions", json: ["email": email, "password": Self.password], port: i % 2 == 0 ? topology.a : topology.b)
                }
                #expect(r.status == 200, "\(email): \(r.status) \(String(decoding: r.body, as: UTF8.self))")
                if r.status != 200 { signInsFailed += 1 }
            }
            if signInsFailed > 0 || slowestSignUp.value >= .seconds(3) { recordLogs() }
            var last: [String] = []
            for loop in loops { last.append(try await loop.value) }
            #expect(slowest.value < .seconds(3), "a refusal took \(slowest.value)")
            // No acknowledged refresh was lost: each user's last acknowledged token refreshes.
            for (i, token) in last.enumerated() {
                let r = try await Self.refresh(stack, token, port: i % 2 == 0 ? topology.a : topology.b)
                #expect(r.status == 200, "user \(i): \(r.status) \(String(decoding: r.body, as: UTF8.self))")
            }
        } catch {
            recordLogs()
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// A new database on the test process's PostgreSQL server.
    static func freshDatabase() async throws -> String {
        let server = try await PostgresServer.shared()
        return server.url(database: try await server.createDatabase())
    }
}

/// A flag set once, read from any task.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// The longest of the durations recorded.
final class Slowest: @unchecked Sendable {
    private let lock = NSLock()
    private var longest: Duration = .zero
    func record(_ duration: Duration) { lock.withLock { longest = max(longest, duration) } }
    var value: Duration { lock.withLock { longest } }
}

/// A thread-safe count.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

enum TokenTestRandom {
    static func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }
}
