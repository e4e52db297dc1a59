import Foundation
import GatehouseSupport
import GatehouseTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `gatehouse store copy` (issue 24 §1): a running deployment's token and identity stores moved
/// from SQLite to PostgreSQL; every user stays signed in and signs in with the same password, what
/// was signed out stays signed out, and the change log continues where it was.
@Suite("gatehouse store copy")
struct StoreCopyEndToEndTests {
    static let password = "correct horse battery"

    /// The emails signed up, in order.
    let emails = Emails()

    func signUp(_ stack: Stack) async throws -> (access: String, refresh: String) {
        let email = "copy-\(UUID().uuidString.prefix(8))@example.com"
        emails.add(email)
        let r = try await stack.request("POST", "/v1/accounts", json: ["email": email, "password": Self.password])
        #expect(r.status == 201, "\(String(decoding: r.body, as: UTF8.self))")
        let s = try #require(r.json["session"] as? [String: Any])
        return (try #require(s["accessToken"] as? String), try #require(s["refreshToken"] as? String))
    }

    func copy(_ arguments: [String]) async throws -> ProcessResult {
        try await runProcess(try gatehouseBinary(), ["store", "copy"] + arguments, environment: ProcessInfo.processInfo.environment)
    }

    @Test("token.sqlite and identity.sqlite copied into PostgreSQL: users, passwords, sessions, rotations, sign-outs, signing keys and the change log carry over; a second copy and bad input are refused")
    func copyThenServe() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let a = try await signUp(stack), b = try await signUp(stack), c = try await signUp(stack)
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": a.refresh])
        let rotated = try #require((refreshed.json["session"] as? [String: Any])?["refreshToken"] as? String)
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: b.access).status == 204)
        // Identity data beyond the user row: a profile change (a change-log entry) and its position.
        #expect(try await stack.request("PATCH", "/v1/me", json: ["displayName": "Copied"], bearer: c.access).status == 200)
        let before = try await SSEClient.connect(port: stack.httpPort, path: "/v1/me/events", bearer: c.access)
        let snapshot = try await before.next()
        let position = try #require(snapshot.seq, "\(snapshot)")
        before.disconnect()

        let server = try await PostgresServer.shared()
        let url = server.url(database: try await server.createDatabase())
        // While the services have their files open: refused, nothing copied.
        let busy = try await copy(["--from", "sqlite:\(stack.dataDir.path)", "--to", url])
        #expect(busy.status == 1 && busy.stderr.contains("stop the identity service"), "\(busy.stderr)")
        await stack.kill("identity", signal: SIGTERM)
        let tokenBusy = try await copy(["--from", "sqlite:\(stack.dataDir.path)", "--to", url])
        #expect(tokenBusy.status == 1 && tokenBusy.stderr.contains("stop the token service"), "\(tokenBusy.stderr)")

        await stack.kill("token", signal: SIGTERM)
        let copied = try await copy(["--from", "sqlite:\(stack.dataDir.path)", "--to", url])
        #expect(copied.status == 0, "\(copied.stderr)")
        #expect(copied.stdout.contains("1 signing keys, 3 sessions, 4 refresh tokens"), "\(copied.stdout)")
        #expect(copied.stdout.contains("4 refresh tokens picked at random find their sessions"), "\(copied.stdout)")
        #expect(copied.stdout.contains("users 3"), "\(copied.stdout)")
        #expect(copied.stdout.contains("3 users picked at random sign in as stored"), "\(copied.stdout)")
        // Into a database that holds the stores now: refused, nothing changed.
        let again = try await copy(["--from", "sqlite:\(stack.dataDir.path)", "--to", url])
        #expect(again.status == 1 && again.stderr.contains("already holds identity data"), "\(again.stderr)")
        for bad in [["--from", stack.dataDir.path, "--to", url], ["--from", "sqlite:\(stack.dataDir.path)", "--to", "mysql://x@y/z"]] {
            let refused = try await copy(bad)
            #expect(refused.status != 0 && !refused.stderr.isEmpty, "\(bad): \(refused.stdout)")
        }

        // Both services on PostgreSQL; the token service with the key-encryption key the SQLite store was sealed with.
        try stack.start("identity", environment: ["GATEHOUSE_IDENTITY_DATABASE_URL": url])
        try stack.start("token", environment: [
            "GATEHOUSE_TOKEN_DATABASE_URL": url,
            "GATEHOUSE_KEY_ENCRYPTION_KEY_FILE": stack.dataDir.appendingPathComponent("key-encryption.key").path,
        ])
        try await stack.waitReady()
        // Access tokens signed before the copy still verify (the same key signs).
        #expect(try await stack.request("GET", "/v1/me", bearer: c.access).status == 200)
        // The rotated session continues from its current token; the signed-out one stays out.
        let next = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": rotated])
        #expect(next.status == 200, "\(String(decoding: next.body, as: UTF8.self))")
        let out = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": b.refresh])
        #expect(out.status == 401 && out.json["code"] as? String == "session_revoked", "\(String(decoding: out.body, as: UTF8.self))")
        #expect(try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": c.refresh]).status == 200)
        // A token superseded before the copy, presented past the grace window, is reuse there too.
        stack.advanceClock(by: .seconds(60))
        let reused = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": a.refresh])
        #expect(reused.status == 401 && reused.json["code"] as? String == "refresh_token_reused", "\(String(decoding: reused.body, as: UTF8.self))")
        // Every user signs in with the same password, from the PostgreSQL identity store; the
        // profile carried over; the change log continues after its last position.
        for email in [emails[0], emails[1], emails[2]] {
            let signIn = try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": Self.password])
            #expect(signIn.status == 200, "\(email): \(String(decoding: signIn.body, as: UTF8.self))")
        }
        #expect(try await stack.request("GET", "/v1/me", bearer: c.access).json["displayName"] as? String == "Copied")
        let after = try await SSEClient.connect(port: stack.httpPort, path: "/v1/me/events", bearer: c.access, lastEventID: "\(position)")
        #expect(try await stack.request("PATCH", "/v1/me", json: ["displayName": "Moved"], bearer: c.access).status == 200)
        let change = try await after.next()
        #expect(change.type == "change" && (change.seq ?? 0) > position, "\(change) after \(position)")
        after.disconnect()
        // An address taken before the copy is still taken; new sign-ups are served by PostgreSQL.
        let taken = try await stack.request("POST", "/v1/accounts", json: ["email": emails[0], "password": Self.password])
        #expect(taken.status == 409, "\(String(decoding: taken.body, as: UTF8.self))")
        _ = try await signUp(stack)
    }
}

/// The emails a test signed up, in order.
final class Emails: @unchecked Sendable {
    private let lock = NSLock()
    private var all: [String] = []
    func add(_ email: String) { lock.withLock { all.append(email) } }
    subscript(_ i: Int) -> String { lock.withLock { all[i] } }
}
