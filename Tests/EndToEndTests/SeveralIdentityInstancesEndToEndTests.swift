import Foundation
import GatehouseContracts
import GatehouseRPC
import GatehouseSupport
import GatehouseTestSupport
import RPCRouting
import Testing

/// Issue 24 §2–§3 for the identity service, over real processes: two identity instances and two
/// token instances on one PostgreSQL database, two gateways that each know every instance
/// (`SeveralInstancesEndToEndTests.Topology`).
@Suite("Several identity instances on PostgreSQL")
struct SeveralIdentityInstancesEndToEndTests {
    typealias Topology = SeveralInstancesEndToEndTests.Topology
    static let password = SeveralInstancesEndToEndTests.password

    static func signUp(_ stack: Stack, _ email: String, port: Int) async throws -> Stack.Response {
        try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": password], port: port)
    }

    static func tokens(_ r: Stack.Response) throws -> (access: String, refresh: String) {
        let session = try #require(r.json["session"] as? [String: Any], "\(r.status) \(String(decoding: r.body, as: UTF8.self))")
        return (try #require(session["accessToken"] as? String), try #require(session["refreshToken"] as? String))
    }

    @Test("one user per email when sign-ups race through both gateways; a resume handle raced through both is taken once; a change made through one gateway reaches a stream on the other")
    func racesAcrossIdentityInstances() async throws {
        let topology = try Topology(databaseURL: try await SeveralInstancesEndToEndTests.freshDatabase())
        defer { topology.stack.stopAll() }
        try await topology.start()
        let stack = topology.stack
        let ports = [topology.a, topology.b]

        // The same email signed up 12 times at once through both gateways (so through both identity
        // instances): one account, the others told the address is taken.
        for round in 0..<3 {
            let email = "race-\(round)@example.com"
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<12 { group.addTask { try await Self.signUp(stack, email, port: ports[i % 2]).status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 201 }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == 409 }.count == 11, "\(statuses)")
        }

        // A session made through one gateway, its profile changed through the other, read back.
        let bea = try Self.tokens(try await Self.signUp(stack, "bea@example.com", port: topology.a))
        let patched = try await stack.request("PATCH", "/v1/me", json: ["displayName": "Bea"], bearer: bea.access, port: topology.b)
        #expect(patched.status == 200)
        #expect(try await stack.request("GET", "/v1/me", bearer: bea.access, port: topology.a).json["displayName"] as? String == "Bea")

        // A stream on gateway B sees a change made through gateway A, whichever identity instance wrote it.
        let stream = try await SSEClient.connect(port: topology.b, path: "/v1/me/events", bearer: bea.access)
        let snapshot = try await stream.next()
        #expect(snapshot.type == "snapshot", "\(snapshot)")
        var seen: [UInt64] = []
        for n in 1...4 {
            let r = try await stack.request("PATCH", "/v1/me", json: ["settings": ["n": n]], bearer: bea.access, port: ports[n % 2])
            #expect(r.status == 200)
            let event = try await stream.next()
            #expect(event.type == "change" && event.changes == ["settings"] && event.n == n, "\(event)")
            if let seq = event.seq { seen.append(seq) }
        }
        #expect(seen == seen.sorted() && Set(seen).count == seen.count, "each change once, in order: \(seen)")
        stream.disconnect()

        // Migration: an anonymous user signs in to bea's account; the handle is raced through both
        // gateways (both identity instances): taken once.
        for _ in 0..<3 {
            let anonymous = try await stack.request("POST", "/v1/accounts/anonymous", port: topology.a)
            let anon = try Self.tokens(anonymous)
            let required = try await stack.request(
                "POST", "/v1/sessions", json: ["email": "bea@example.com", "password": Self.password], bearer: anon.access, port: topology.b)
            #expect(required.json["code"] as? String == "migration_required")
            let handle = try #require(required.json["resumeHandle"] as? String)
            let resumed = try await withThrowingTaskGroup(of: Stack.Response.self) { group in
                for i in 0..<6 {
                    group.addTask {
                        try await stack.request(
                            "POST", "/v1/sessions/resume", json: ["resumeHandle": handle, "allowMigration": true], bearer: anon.access,
                            port: ports[i % 2])
                    }
                }
                return try await group.reduce(into: [Stack.Response]()) { $0.append($1) }
            }
            let statuses = resumed.map(\.status)
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
            for r in resumed where r.status != 200 {
                // Taken by another call, or its anonymous user already gone with the migration.
                #expect([400, 401].contains(r.status), "\(r.status) \(String(decoding: r.body, as: UTF8.self))")
            }
        }
    }

    @Test("kill -9 of one identity instance under sign-up and sign-in load: the other keeps serving, every acknowledged sign-up signs in")
    func killOneIdentityInstance() async throws {
        let topology = try Topology(databaseURL: try await SeveralInstancesEndToEndTests.freshDatabase())
        defer { topology.stack.stopAll() }
        try await topology.start()
        let stack = topology.stack
        let ports = [topology.a, topology.b]
        let acknowledged = Counter(), failures = Counter()
        let accounts = Accounts()
        // Four writers sign up new users through alternating gateways and sign each in again.
        let loops = (0..<4).map { writer in
            Task {
                for step in 0..<30 {
                    let email = "kill-\(writer)-\(step)@example.com"
                    let port = ports[(writer + step) % 2]
                    let r = try await Self.signUp(stack, email, port: port)
                    if r.status == 201 {
                        acknowledged.add()
                        accounts.add(email)
                        // And a sign-in of it through the other gateway (refused only as unavailable).
                        let signIn = try await stack.request(
                            "POST", "/v1/sessions", json: ["email": email, "password": Self.password], port: ports[(writer + step + 1) % 2])
                        #expect([200, 503, 504].contains(signIn.status), "sign-in answered \(signIn.status)")
                    } else {
                        // An instance killed mid-call: the sign-up may have committed without its answer.
                        #expect([503, 504, 409].contains(r.status), "sign-up answered \(r.status) \(String(decoding: r.body, as: UTF8.self))")
                        failures.add()
                    }
                }
            }
        }
        try await waitUntil("sign-ups acknowledged before the kill") { acknowledged.value >= 16 }
        await stack.kill("identity-a")
        for loop in loops { try await loop.value }
        #expect(acknowledged.value + failures.value == 120)
        #expect(failures.value <= 12, "\(failures.value) sign-ups failed around the kill")
        if failures.value > 12 {
            for name in ["identity-b", "token-a", "token-b"] { Issue.record("\(name)'s log:\n\(stack.log(of: name).suffix(2500))") }
        }
        // Zero acknowledged writes lost: every acknowledged account signs in, through both gateways.
        for (i, email) in accounts.all.enumerated() {
            let r = try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": Self.password], port: ports[i % 2])
            #expect(r.status == 200, "\(email): \(r.status) \(String(decoding: r.body, as: UTF8.self))")
        }
        // The instance comes back (on the migrated database) and serves: sign-ups through both
        // gateways, spread over both instances again.
        try topology.startIdentity("identity-a")
        do {
            let a = try topology.identityClient("identity-a")
            defer { Task { await a.close() } }
            try await waitUntil("identity-a back") { (try? await a.call(IdentityAPI.stats, Empty())) != nil }
        } catch {
            Issue.record("identity-a's log:\n\(stack.log(of: "identity-a").suffix(3000))")
            throw error
        }
        for i in 0..<6 {
            let r = try await Self.signUp(stack, "after-\(i)@example.com", port: ports[i % 2])
            #expect(r.status == 201, "\(r.status) \(String(decoding: r.body, as: UTF8.self))")
        }
    }
}

/// The emails of acknowledged sign-ups.
final class Accounts: @unchecked Sendable {
    private let lock = NSLock()
    private var emails: [String] = []
    func add(_ email: String) { lock.withLock { emails.append(email) } }
    var all: [String] { lock.withLock { emails } }
}
