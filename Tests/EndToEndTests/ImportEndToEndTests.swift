import Foundation
import GatehouseTestSupport
import Testing

/// `gatehouse users import|export` (issue 22 §5) against three processes: hashes made by the
/// real tools sign in over HTTP and become Argon2id; re-runs are idempotent; bad lines are
/// reported by number without stopping the others; an export imports again.
@Suite("gatehouse users import and export against three processes")
struct ImportEndToEndTests {
    /// Python: `argon2.PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash("old argon passphrase")`.
    static let argonHash = "$argon2id$v=19$m=8,t=1,p=1$P+a0c7ZSb745dca165nUsg$RRE+Gn87az0EyD1vMhrHuY4PeS8uTH6UBBCUoPpB0iQ"
    /// Python: `bcrypt.hashpw(b"old bcrypt passphrase", bcrypt.gensalt(4))`.
    static let bcryptHash = "$2b$04$AzTUpxHc9OS8jAz0KJzAG.AzmYKsCUwxwhKMEi5lnAojb4YNiEirK"

    func signIn(_ stack: Stack, _ email: String, _ password: String) async throws -> Int {
        try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": password]).status
    }

    /// The exported jsonl lines as objects, by email.
    func exported(_ stack: Stack, _ arguments: [String] = ["--include-hashes"]) async throws -> [String: [String: Any]] {
        let result = try await runUsersCommand(stack, ["export"] + arguments)
        #expect(result.status == 0, "\(result.stderr)")
        var users: [String: [String: Any]] = [:]
        for line in result.stdout.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            users[object["email"] as? String ?? ""] = object
        }
        return users
    }

    @Test("jsonl import: summary and failed line numbers, idempotent re-runs, old passwords sign in and are rehashed to Argon2id, export round-trips")
    func importSignInAndExport() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let file = stack.dataDir.appendingPathComponent("users.jsonl")
        let lines = [
            #"{"id":"imported-argon-user-000001","email":"argon@example.com","emailVerified":true,"displayName":"Argon","passwordHash":"\#(Self.argonHash)","providers":["google.com"],"customClaims":{"tier":2},"createdAt":"2021-03-04T05:06:07.890Z"}"#,
            #"{"email":"bcrypt@example.com","passwordHash":"\#(Self.bcryptHash)"}"#,
            #"{"email":"broken@example.com","passwordHash":"md5$nope"}"#,
            "{not json",
            "",
            #"{"email":"typo@example.com","emial":"x"}"#,
        ]
        try Data(lines.joined(separator: "\n").utf8).write(to: file)

        let first = try await runUsersCommand(stack, ["import", file.path])
        #expect(first.status == 1, "\(first.stderr)")
        let out = first.stdout.split(separator: "\n").map(String.init)
        #expect(out.last == "created 2, updated 0, skipped 0, failed 3", "\(first.stdout)")
        #expect(out.contains { $0.hasPrefix("line 3: ") && $0.contains("unknown hash format") && $0.hasSuffix("(invalid_argument)") }, "\(first.stdout)")
        #expect(out.contains("line 4: not JSON"), "\(first.stdout)")
        #expect(out.contains { $0.hasPrefix("line 6: unknown field emial") }, "\(first.stdout)")
        #expect(!first.stdout.contains("md5$nope"))

        // Again: nothing new; with --mode update the two users are written again.
        let again = try await runUsersCommand(stack, ["import", file.path])
        #expect(again.stdout.hasSuffix("created 0, updated 0, skipped 2, failed 3\n"), "\(again.stdout)")
        let update = try await runUsersCommand(stack, ["import", file.path, "--mode", "update"])
        #expect(update.stdout.hasSuffix("created 0, updated 2, skipped 0, failed 3\n"), "\(update.stdout)")

        // The old passwords sign in over HTTP; the stored hashes become Argon2id (the role's parameters).
        #expect(try await signIn(stack, "bcrypt@example.com", "wrong passphrase entirely") == 401)
        #expect(try await signIn(stack, "bcrypt@example.com", "old bcrypt passphrase") == 200)
        #expect(try await signIn(stack, "argon@example.com", "old argon passphrase") == 200)
        let users = try await exported(stack)
        let bcrypt = try #require(users["bcrypt@example.com"])
        #expect((bcrypt["passwordHash"] as? String)?.hasPrefix("$argon2id$v=19$") == true)
        #expect(bcrypt["passwordHash"] as? String != Self.bcryptHash)
        let argon = try #require(users["argon@example.com"])
        #expect(argon["passwordHash"] as? String != Self.argonHash)
        #expect(argon["id"] as? String == "imported-argon-user-000001" && argon["displayName"] as? String == "Argon")
        #expect(argon["providers"] as? [String] == ["google.com"] && (argon["customClaims"] as? [String: Any])?["tier"] as? Int == 2)
        #expect(argon["createdAt"] as? String == "2021-03-04T05:06:07.890Z" && argon["emailVerified"] as? Bool == true)
        #expect(try await signIn(stack, "bcrypt@example.com", "old bcrypt passphrase") == 200)

        // Without --include-hashes no hash leaves; to a file, mode 0600; that file imports again as all skipped.
        #expect(try await exported(stack, []).values.allSatisfy { $0["passwordHash"] == nil })
        let dump = stack.dataDir.appendingPathComponent("export.jsonl")
        let written = try await runUsersCommand(stack, ["export", dump.path, "--include-hashes"])
        #expect(written.status == 0 && written.stderr.contains("exported 2 users"), "\(written.stderr)")
        let mode = try FileManager.default.attributesOfItem(atPath: dump.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let reimport = try await runUsersCommand(stack, ["import", dump.path])
        #expect(reimport.status == 0 && reimport.stdout == "created 0, updated 0, skipped 2, failed 0\n", "\(reimport.stdout)\(reimport.stderr)")
    }

    @Test("firebase import: users of a `firebase auth:export` file, providers and claims kept; a password without the hash parameters is refused by line")
    func firebaseImport() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let file = stack.dataDir.appendingPathComponent("firebase.json")
        let export = """
            {"users": [
              {"localId": "googleOnlyLocalId0000000001", "email": "g@example.com", "emailVerified": true,
               "displayName": "G {braces} \\"quoted\\"", "photoUrl": "https://example.com/g.png", "createdAt": "1600000000123",
               "customAttributes": "{\\"plan\\":\\"pro\\"}", "disabled": false,
               "providerUserInfo": [{"providerId": "google.com", "rawId": "1234", "email": "g@example.com"}]},
              {"localId": "passwordLocalId000000000002", "email": "p@example.com",
               "passwordHash": "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==",
               "salt": "42xEC+ixf3L2lw==", "providerUserInfo": [{"providerId": "password", "rawId": "p@example.com"}]}
            ]}
            """
        try Data(export.utf8).write(to: file)
        let result = try await runUsersCommand(stack, ["import", file.path, "--format", "firebase"])
        #expect(result.status == 1)
        #expect(result.stdout.contains("line 6: the user has a password: give the project's hash parameters"), "\(result.stdout)")
        #expect(result.stdout.hasSuffix("created 1, updated 0, skipped 0, failed 1\n"), "\(result.stdout)")
        let users = try await exported(stack)
        let g = try #require(users["g@example.com"])
        #expect(g["id"] as? String == "googleOnlyLocalId0000000001" && g["providers"] as? [String] == ["google.com"])
        #expect(g["displayName"] as? String == #"G {braces} "quoted""# && (g["customClaims"] as? [String: Any])?["plan"] as? String == "pro")
        #expect(g["createdAt"] as? String == "2020-09-13T12:26:40.123Z" && g["passwordHash"] == nil)
        let badFlags = try await runUsersCommand(stack, ["import", file.path, "--format", "firebase", "--hash-key", "abc="])
        #expect(badFlags.status != 0 && badFlags.stderr.contains("--salt-separator"), "\(badFlags.stderr)")
    }

    /// The stored form of the firebase/scrypt README's test vector (user1password).
    static let firebaseVector =
        "$firebase-scrypt$ln=14,r=8,p=1$Bw==$jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==$42xEC+ixf3L2lw==$lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ=="

    @Test("firebase import with the project's hash parameters: the user signs in with its Firebase password, which becomes Argon2id")
    func firebasePasswordSignsIn() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let file = stack.dataDir.appendingPathComponent("firebase.json")
        let export = #"{"users":[{"localId":"passwordLocalId000000000002","email":"p@example.com","emailVerified":true,"#
            + #""passwordHash":"lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==","salt":"42xEC+ixf3L2lw==","#
            + #""providerUserInfo":[{"providerId":"password","rawId":"p@example.com"}]}]}"#
        try Data(export.utf8).write(to: file)
        let result = try await runUsersCommand(
            stack,
            [
                "import", file.path, "--format", "firebase", "--hash-key",
                "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==", "--salt-separator", "Bw==",
                "--rounds", "8", "--mem-cost", "14",
            ])
        #expect(result.status == 0 && result.stdout == "created 1, updated 0, skipped 0, failed 0\n", "\(result.stdout)\(result.stderr)")
        #expect(try await exported(stack)["p@example.com"]?["passwordHash"] as? String == Self.firebaseVector)
        #expect(try await signIn(stack, "p@example.com", "user1passwordx") == 401)
        #expect(try await signIn(stack, "p@example.com", "user1password") == 200)
        let stored = try #require(try await exported(stack)["p@example.com"]?["passwordHash"] as? String)
        #expect(stored.hasPrefix("$argon2id$"))
    }
}
