import Foundation
import GatehouseTestSupport
import Testing

/// `gatehouse users import|export` and `gatehouse audit` through the admin API (issue 37 §2):
/// with an admin API key they work on `gatehouse serve`, whose services have no RPC endpoint
/// outside the process, as on three processes; the routes' own limits over HTTP.
@Suite("users import, export and audit through the admin API")
struct AdminTransferEndToEndTests {
    /// Makes a key with `scopes` on the stack's data folder; the key and its id.
    static func key(_ stack: Stack, scopes: String) async throws -> (key: String, id: String) {
        let made = try await runProcess(
            try gatehouseBinary(), ["admin", "keys", "create", "--name", "transfer", "--scope", scopes, "--data-dir", stack.dataDir.path],
            environment: stack.environment)
        let key = try #require(made.stdout.split(whereSeparator: \.isWhitespace).first { $0.hasPrefix("gha_") }.map(String.init), "\(made.stderr)")
        return (key, String(key.dropFirst(4).prefix { $0 != "." }))
    }

    static func run(_ stack: Stack, _ key: String, _ arguments: [String]) async throws -> ProcessResult {
        try await runProcess(try gatehouseBinary(), arguments, environment: stack.environment.merging(["GATEHOUSE_ADMIN_KEY": key]) { $1 })
    }

    static func signIn(_ stack: Stack, _ email: String, _ password: String) async throws -> Int {
        try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": password]).status
    }

    @Test("gatehouse serve: import (jsonl with bad lines, then Firebase with the hash parameters), export with and without hashes, re-import of the export, and the audit log, all with an admin API key; imported passwords sign in")
    func everythingUnderServe() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("serve")
        try await stack.waitReady()
        let (key, keyID) = try await Self.key(stack, scopes: "users:import,users:export,audit")

        let jsonl = stack.dataDir.appendingPathComponent("users.jsonl")
        try Data([
            #"{"id":"imported-argon-user-000001","email":"argon@example.com","emailVerified":true,"passwordHash":"\#(ImportEndToEndTests.argonHash)","providers":["google.com"],"customClaims":{"tier":2}}"#,
            #"{"email":"bcrypt@example.com","passwordHash":"\#(ImportEndToEndTests.bcryptHash)"}"#,
            #"{"email":"broken@example.com","passwordHash":"md5$nope"}"#,
            "{not json",
            "",
            #"{"email":"typo@example.com","emial":"x"}"#,
        ].joined(separator: "\n").utf8).write(to: jsonl)
        let first = try await Self.run(stack, key, ["users", "import", jsonl.path])
        #expect(first.status == 1, "\(first.stderr)")
        let out = first.stdout.split(separator: "\n").map(String.init)
        #expect(out.last == "created 2, updated 0, skipped 0, failed 3", "\(first.stdout)\(first.stderr)")
        #expect(out.contains { $0.hasPrefix("line 3: ") && $0.contains("unknown hash format") && $0.hasSuffix("(invalid_argument)") }, "\(first.stdout)")
        #expect(out.contains("line 4: not JSON"), "\(first.stdout)")
        #expect(out.contains { $0.hasPrefix("line 6: unknown field emial") }, "\(first.stdout)")
        #expect(!first.stdout.contains("md5$nope"))
        let again = try await Self.run(stack, key, ["users", "import", jsonl.path])
        #expect(again.stdout.hasSuffix("created 0, updated 0, skipped 2, failed 3\n"), "\(again.stdout)")

        let firebase = stack.dataDir.appendingPathComponent("firebase.json")
        try Data((#"{"users":[{"localId":"passwordLocalId000000000002","email":"p@example.com","emailVerified":true,"#
            + #""passwordHash":"lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==","salt":"42xEC+ixf3L2lw==","#
            + #""providerUserInfo":[{"providerId":"password","rawId":"p@example.com"}]}]}"#).utf8).write(to: firebase)
        let fromFirebase = try await Self.run(stack, key, [
            "users", "import", firebase.path, "--format", "firebase", "--hash-key",
            "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==", "--salt-separator", "Bw==",
            "--rounds", "8", "--mem-cost", "14",
        ])
        #expect(fromFirebase.status == 0 && fromFirebase.stdout == "created 1, updated 0, skipped 0, failed 0\n", "\(fromFirebase.stdout)\(fromFirebase.stderr)")
        #expect(try await Self.signIn(stack, "p@example.com", "user1password") == 200)
        #expect(try await Self.signIn(stack, "argon@example.com", "old argon passphrase") == 200)
        #expect(try await Self.signIn(stack, "bcrypt@example.com", "old bcrypt passphrase") == 200)
        #expect(try await Self.signIn(stack, "bcrypt@example.com", "wrong passphrase") == 401)

        // Export: a new 0600 file without hashes; with --include-hashes to standard output.
        let plain = stack.dataDir.appendingPathComponent("export.jsonl")
        let exported = try await Self.run(stack, key, ["users", "export", plain.path])
        #expect(exported.status == 0 && exported.stderr.contains("exported 3 users"), "\(exported.stderr)")
        let mode = try FileManager.default.attributesOfItem(atPath: plain.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let plainLines = try String(contentsOf: plain, encoding: .utf8).split(separator: "\n")
        #expect(plainLines.count == 3 && !plainLines.contains { $0.contains("passwordHash") })
        #expect(plainLines.contains { $0.contains(#""id":"imported-argon-user-000001""#) && $0.contains(#""customClaims":{"tier":2}"#) })
        let withHashes = try await Self.run(stack, key, ["users", "export", "--include-hashes"])
        #expect(withHashes.status == 0)
        let hashed = withHashes.stdout.split(separator: "\n")
        #expect(hashed.count == 3 && hashed.allSatisfy { $0.contains(#""passwordHash":"$argon2id$"#) }, "rehashed at sign-in: \(withHashes.stdout)")
        let back = stack.dataDir.appendingPathComponent("back.jsonl")
        try Data(withHashes.stdout.utf8).write(to: back)
        let reimport = try await Self.run(stack, key, ["users", "import", back.path, "--mode", "update"])
        #expect(reimport.status == 0 && reimport.stdout == "created 0, updated 3, skipped 0, failed 0\n", "\(reimport.stdout)\(reimport.stderr)")
        #expect(try await Self.signIn(stack, "p@example.com", "user1password") == 200, "the exported hash imports again")

        // The audit log through the admin API: each batch is `users.imported` by this key.
        let audit = try await Self.run(stack, key, ["audit", "export", "-"])
        #expect(audit.status == 0, "\(audit.stderr)")
        let imports = audit.stdout.split(separator: "\n").filter { $0.contains(#""kind":"users.imported""#) }
        #expect(imports.count == 4 && imports.allSatisfy { $0.contains(#""actor":"admin_key:\#(keyID)""#) }, "\(audit.stdout)")
        let tail = try await Self.run(stack, key, ["audit", "tail", "--json", "--since", "1h"])
        #expect(tail.status == 0 && tail.stdout.contains(#""kind":"users.imported""#), "\(tail.stdout)\(tail.stderr)")
        let text = try await Self.run(stack, key, ["audit", "tail"])
        #expect(text.stdout.contains("users.imported"), "\(text.stdout)")
    }

    @Test("a key without the scope is refused: import needs users:import, export users:export, audit audit (exit 1, the code named)")
    func scopes() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let (key, _) = try await Self.key(stack, scopes: "users:read")
        let file = stack.dataDir.appendingPathComponent("one.jsonl")
        try Data(#"{"email":"one@example.com"}"#.utf8).write(to: file)
        let imported = try await Self.run(stack, key, ["users", "import", file.path])
        #expect(imported.status == 1 && imported.stderr.contains("insufficient_scope") && imported.stderr.contains("users:import"), "\(imported.stderr)")
        let exported = try await Self.run(stack, key, ["users", "export"])
        #expect(exported.status == 1 && exported.stderr.contains("insufficient_scope"), "\(exported.stderr)")
        let audit = try await Self.run(stack, key, ["audit", "export", "-"])
        #expect(audit.status == 1 && audit.stderr.contains("insufficient_scope"), "\(audit.stderr)")
        let (importer, _) = try await Self.key(stack, scopes: "users:import")
        #expect(try await Self.run(stack, importer, ["users", "import", file.path]).stdout == "created 1, updated 0, skipped 0, failed 0\n")
    }

    @Test("the routes over HTTP: results by line (CRLF and blank lines), 415 for another content type, 422 for a bad mode or over 1,000 lines, 413 over 4 MiB; the export is chunked JSON lines")
    func routes() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let (key, _) = try await Self.key(stack, scopes: "users:import,users:export")
        let lines = "\r\n" + #"{"email":"a@example.com","displayName":"A"}"# + "\r\n" + #"{"email":"not an email"}"# + "\n\n" + #"{"email":"b@example.com"}"#
        func post(_ body: String, type: String = "application/x-ndjson", query: String = "") async throws -> Stack.Response {
            try await stack.request(
                "POST", "/admin/v1/users/import" + query, rawBody: Data(body.utf8), headers: ["Content-Type": type], bearer: key,
                port: stack.adminPort)
        }
        let answer = try await post(lines)
        #expect(answer.status == 200, "\(answer.json)")
        #expect(answer.json["created"] as? Int == 2 && answer.json["failed"] as? Int == 1)
        let results = try #require(answer.json["results"] as? [[String: Any]])
        #expect(results.map { $0["line"] as? Int } == [2, 3, 5])
        #expect(results.map { $0["outcome"] as? String } == ["created", "failed", "created"])
        #expect(results[1]["code"] as? String == "invalid_email" && results[0]["userId"] as? String != nil)
        #expect(try await post(lines, type: "application/json").status == 415)
        // The CLI's form, the contract's ImportUsersRequest in protobuf (its import tests above use
        // it): a body that is not one is 400.
        let garbage = try await post("\u{FF}\u{FF}\u{FF}\u{FF}", type: "application/x-protobuf")
        #expect(garbage.status == 400 && garbage.json["code"] as? String == "malformed_request", "\(garbage.json)")
        let badMode = try await post(lines, query: "?mode=replace")
        #expect(badMode.status == 422 && badMode.json["code"] as? String == "invalid_argument")
        let many = (0...1_000).map { #"{"email":"m\#($0)@example.com"}"# }.joined(separator: "\n")
        let tooMany = try await post(many)
        #expect(tooMany.status == 422 && (tooMany.json["detail"] as? String ?? "").contains("1000"), "\(tooMany.json)")
        let huge = String(repeating: #"{"email":"h@example.com","displayName":"\#(String(repeating: "x", count: 200))"}"# + "\n", count: 20_000)
        #expect(try await post(huge).status == 413)
        let rerun = try await post(lines, query: "?mode=skip&results=failed")
        #expect(rerun.json["skipped"] as? Int == 2 && rerun.json["failed"] as? Int == 1, "a re-run skips")
        #expect((rerun.json["results"] as? [[String: Any]])?.map { $0["line"] as? Int } == [3], "only the failed line is listed")
        #expect(try await post(lines, query: "?results=some").status == 422)

        let export = try await stack.request("GET", "/admin/v1/users/export", bearer: key, port: stack.adminPort)
        #expect(export.status == 200)
        #expect(export.headers["content-type"] == "application/x-ndjson" && export.headers["cache-control"] == "no-store")
        let exportedLines = String(decoding: export.body, as: UTF8.self).split(separator: "\n")
        #expect(exportedLines.count == 2 && exportedLines.allSatisfy { $0.hasPrefix("{") && !$0.contains("passwordHash") })
        let badFlag = try await stack.request("GET", "/admin/v1/users/export?includeHashes=yes", bearer: key, port: stack.adminPort)
        #expect(badFlag.status == 422)
    }
}
