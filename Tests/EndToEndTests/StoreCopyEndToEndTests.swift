import Foundation
import GatehouseTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `gatehouse store copy` (issue 24 §1): a running deployment's token store moved from SQLite to
/// PostgreSQL; every user stays signed in, and what was signed out stays signed out.
@Suite("gatehouse store copy")
struct StoreCopyEndToEndTests {
    static let password = "correct horse battery"

    func signUp(_ stack: Stack) async throws -> (access: String, refresh: String) {
        let r = try await stack.request("POST", "/v1/accounts", json: ["email": "copy-\(UUID().uuidString.prefix(8))@example.com", "password": Self.password])
        #expect(r.status == 201, "\(String(decoding: r.body, as: UTF8.self))")
        let s = try #require(r.json["session"] as? [String: Any])
        return (try #require(s["accessToken"] as? String), try #require(s["refreshToken"] as? String))
    }

    func copy(_ arguments: [String]) async throws -> ProcessResult {
        try await runProcess(try gatehouseBinary(), ["store", "copy"] + arguments, environment: ProcessInfo.processInfo.environment)
    }

    @Test("a token.sqlite copied into PostgreSQL: sessions, rotations, sign-outs and signing keys carry over; a second copy and bad input are refused")
    func copyThenServe() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let a = try await signUp(stack), b = try await signUp(stack), c = try await signUp(stack)
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": a.refresh])
        let rotated = try #require((refreshed.json["session"] as? [String: Any])?["refreshToken"] as? String)
        #expect(try await stack.request("DELETE", "/v1/sessions/current", bearer: b.access).status == 204)

        let server = try await PostgresServer.shared()
        let url = server.url(database: try await server.createDatabase())
        // While the token service has the file open: refused.
        let busy = try await copy(["--from", "sqlite:\(stack.dataDir.path)", "--to", url])
        #expect(busy.status == 1 && busy.stderr.contains("stop the token service"), "\(busy.stderr)")

        await stack.kill("token", signal: SIGTERM)
        let copied = try await copy(["--from", "sqlite:\(stack.dataDir.path)", "--to", url])
        #expect(copied.status == 0, "\(copied.stderr)")
        #expect(copied.stdout.contains("1 signing keys, 3 sessions, 4 refresh tokens"), "\(copied.stdout)")
        #expect(copied.stdout.contains("4 refresh tokens picked at random find their sessions"), "\(copied.stdout)")
        // Into a database that holds a token store now: refused, nothing changed.
        let again = try await copy(["--from", "sqlite:\(stack.dataDir.path)", "--to", url])
        #expect(again.status == 1 && again.stderr.contains("already holds a token store"), "\(again.stderr)")
        for bad in [["--from", stack.dataDir.path, "--to", url], ["--from", "sqlite:\(stack.dataDir.path)", "--to", "mysql://x@y/z"]] {
            let refused = try await copy(bad)
            #expect(refused.status != 0 && !refused.stderr.isEmpty, "\(bad): \(refused.stdout)")
        }

        // The token service on PostgreSQL, with the key-encryption key the SQLite store was sealed with.
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
        // New sign-ups are served by the PostgreSQL store.
        _ = try await signUp(stack)
    }
}
