import ArgumentParser
import Foundation
import GatehouseApp

/// Runs `body` with an admin API client configured by `options`, printing what it returns, or the
/// error on stderr and exiting 1.
func withAdminAPI(_ options: [String], _ body: (AdminAPIClient) async throws -> String) async throws {
    let client: AdminAPIClient
    do { client = try AdminAPIClient(config: try Config(arguments: options)) } catch {
        throw failed("error: \(error)")
    }
    do {
        let output = try await body(client)
        if !output.isEmpty { print(output) }
    } catch let failure as AdminAPIClient.Failure {
        throw failed("\(failure)")
    }
}

/// How users are printed: one JSON object per line (`--json`), or a table.
enum UserText {
    static let header = ["ID", "EMAIL", "VERIFIED", "PROVIDERS", "DISABLED", "CREATED", "LAST SIGN-IN"]

    static func row(_ user: [String: Any]) -> [String] {
        [
            user["id"] as? String ?? "", user["email"] as? String ?? "(anonymous)", (user["emailVerified"] as? Bool ?? false) ? "yes" : "no",
            (user["providers"] as? [String] ?? []).joined(separator: ","), (user["disabled"] as? Bool ?? false) ? "yes" : "no",
            user["createdAt"] as? String ?? "", user["lastSignInAt"] as? String ?? "-",
        ]
    }

    static func json(_ object: Any) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// One user: `--json` as one object, else `name: value` lines.
    static func detail(_ user: [String: Any], json asJSON: Bool) -> String {
        if asJSON { return json(user) }
        let claims = json(user["customClaims"] ?? [String: Any]())
        return zip(header + ["DISPLAY NAME", "CUSTOM CLAIMS", "UPDATED"], row(user) + [
            user["displayName"] as? String ?? "-", claims, user["updatedAt"] as? String ?? "",
        ]).map { "\($0.0.lowercased()): \($0.1)" }.joined(separator: "\n")
    }
}

/// `--json` and the id, then the configuration flags.
func idAndFlags<C: ParsableCommand>(_ words: [String], _ command: C.Type) throws -> (id: String, json: Bool, rest: [String]) {
    var (id, rest) = try userArguments(words, command)
    let json = takeFlag("--json", from: &rest)
    return (id, json, rest)
}

struct ListUsers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List and search users in id order (a page; --all for every page).")
    @Argument(
        parsing: .captureForPassthrough,
        help: """
            [--email-prefix P] [--provider P] [--disabled|--enabled] [--anonymous|--regular] [--created-after T] \
            [--created-before T] [--limit N] [--cursor C] [--all] [--json] [FLAGS...]
            """)
    var words: [String] = []

    func run() async throws {
        var rest = words
        if rest.first == "--help" || rest.first == "-h" { throw CleanExit.helpRequest(Self.self) }
        var query: [(String, String)] = []
        for (flag, name) in [
            ("--email-prefix", "emailPrefix"), ("--provider", "provider"), ("--created-after", "createdAfter"),
            ("--created-before", "createdBefore"), ("--limit", "limit"),
        ] {
            if let value = try takeOption(flag, from: &rest) { query.append((name, value)) }
        }
        if takeFlag("--disabled", from: &rest) { query.append(("disabled", "true")) }
        if takeFlag("--enabled", from: &rest) { query.append(("disabled", "false")) }
        if takeFlag("--anonymous", from: &rest) { query.append(("anonymous", "true")) }
        if takeFlag("--regular", from: &rest) { query.append(("anonymous", "false")) }
        var cursor = try takeOption("--cursor", from: &rest)
        let all = takeFlag("--all", from: &rest)
        let json = takeFlag("--json", from: &rest)
        try await withAdminAPI(rest) { client in
            var users: [[String: Any]] = []
            var next: String?
            repeat {
                let page = try await client.call("GET", "admin/v1/users", query: query + (cursor.map { [("cursor", $0)] } ?? []))
                users += page["users"] as? [[String: Any]] ?? []
                next = page["nextCursor"] as? String
                cursor = next
            } while all && next != nil
            if json { return users.map(UserText.json).joined(separator: "\n") }
            var table = TextTable.render(UserText.header, users.map(UserText.row))
            if let next, !all { table += "\nmore: --cursor \(next)" }
            return table
        }
    }
}

struct GetUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Show one user, with its custom claims.")
    @Argument(parsing: .captureForPassthrough, help: "ID [--json] [FLAGS...]") var words: [String] = []
    func run() async throws {
        let (id, json, rest) = try idAndFlags(words, Self.self)
        try await withAdminAPI(rest) { client in UserText.detail(try await client.call("GET", "admin/v1/users/\(id)"), json: json) }
    }
}

/// `--password-stdin` reads the password from standard input (never a flag: it would be in the
/// shell history and the process list).
func passwordFromStdin(_ rest: inout [String]) -> String? {
    guard takeFlag("--password-stdin", from: &rest) else { return nil }
    let line = readLine(strippingNewline: true) ?? ""
    return line
}

struct CreateUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Create a user (no session, no mail); without a password it signs in after a reset.")
    @Argument(
        parsing: .captureForPassthrough,
        help: "--email E [--password-stdin] [--email-verified] [--display-name N] [--disabled] [--json] [FLAGS...]")
    var words: [String] = []
    func run() async throws {
        var rest = words
        if rest.first == "--help" || rest.first == "-h" { throw CleanExit.helpRequest(Self.self) }
        guard let email = try takeOption("--email", from: &rest) else { throw ValidationError("Missing --email.") }
        var body: [String: Any] = ["email": email]
        if let password = passwordFromStdin(&rest) { body["password"] = password }
        if takeFlag("--email-verified", from: &rest) { body["emailVerified"] = true }
        if takeFlag("--disabled", from: &rest) { body["disabled"] = true }
        if let name = try takeOption("--display-name", from: &rest) { body["displayName"] = name }
        let json = takeFlag("--json", from: &rest)
        try await withAdminAPI(rest) { client in
            let user = try await client.call("POST", "admin/v1/users", body: body)
            return json ? UserText.json(user) : "user \(user["id"] as? String ?? "") created"
        }
    }
}

struct UpdateUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update", abstract: "Change a user: email (applied at once), display name, verified flag, password (sessions revoked).")
    @Argument(
        parsing: .captureForPassthrough,
        help: "ID [--email E] [--display-name N] [--email-verified true|false] [--password-stdin] [--json] [FLAGS...]")
    var words: [String] = []
    func run() async throws {
        var (id, json, rest) = try idAndFlags(words, Self.self)
        var body: [String: Any] = [:]
        if let email = try takeOption("--email", from: &rest) { body["email"] = email }
        if let name = try takeOption("--display-name", from: &rest) { body["displayName"] = name }
        if let verified = try takeOption("--email-verified", from: &rest) {
            guard verified == "true" || verified == "false" else { throw ValidationError("--email-verified must be true or false.") }
            body["emailVerified"] = verified == "true"
        }
        if let password = passwordFromStdin(&rest) { body["password"] = password }
        guard !body.isEmpty else { throw ValidationError("Nothing to change: give --email, --display-name, --email-verified or --password-stdin.") }
        try await withAdminAPI(rest) { client in
            let user = try await client.call("PATCH", "admin/v1/users/\(id)", body: body)
            return json ? UserText.json(user) : "user \(id) updated"
        }
    }
}

struct DisableUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disable",
        abstract: "Disable a user: sign-in answers user_disabled, and every session is revoked (refresh and access tokens refused).")
    @Argument(parsing: .captureForPassthrough, help: userWordsHelp) var words: [String] = []
    func run() async throws {
        let (id, _, rest) = try idAndFlags(words, Self.self)
        try await withAdminAPI(rest) { client in
            _ = try await client.call("PATCH", "admin/v1/users/\(id)", body: ["disabled": true])
            return "user \(id) disabled; its sessions are revoked"
        }
    }
}

struct EnableUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enable", abstract: "Enable a disabled user again (it signs in anew; revoked sessions stay revoked).")
    @Argument(parsing: .captureForPassthrough, help: userWordsHelp) var words: [String] = []
    func run() async throws {
        let (id, _, rest) = try idAndFlags(words, Self.self)
        try await withAdminAPI(rest) { client in
            _ = try await client.call("PATCH", "admin/v1/users/\(id)", body: ["disabled": false])
            return "user \(id) enabled"
        }
    }
}

struct DeleteUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete a user: its row and linked identities are removed and every session is revoked; the email can register again.")
    @Argument(parsing: .captureForPassthrough, help: userWordsHelp) var words: [String] = []
    func run() async throws {
        let (id, _, rest) = try idAndFlags(words, Self.self)
        try await withAdminAPI(rest) { client in
            _ = try await client.call("DELETE", "admin/v1/users/\(id)")
            return "user \(id) deleted; its sessions are revoked"
        }
    }
}

struct RevokeSessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke-sessions", abstract: "Revoke every session of a user (refresh and access tokens refused).")
    @Argument(parsing: .captureForPassthrough, help: userWordsHelp) var words: [String] = []
    func run() async throws {
        let (id, json, rest) = try idAndFlags(words, Self.self)
        try await withAdminAPI(rest) { client in
            let reply = try await client.call("DELETE", "admin/v1/users/\(id)/sessions")
            return json ? UserText.json(reply) : "\(reply["revoked"] as? Int ?? 0) sessions of user \(id) revoked"
        }
    }
}

struct UserSessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "sessions", abstract: "List a user's sessions, ended ones included.")
    @Argument(parsing: .captureForPassthrough, help: userWordsHelp) var words: [String] = []
    func run() async throws {
        let (id, json, rest) = try idAndFlags(words, Self.self)
        try await withAdminAPI(rest) { client in
            let sessions = try await client.call("GET", "admin/v1/users/\(id)/sessions")["sessions"] as? [[String: Any]] ?? []
            if json { return sessions.map(UserText.json).joined(separator: "\n") }
            return TextTable.render(
                ["SESSION", "CREATED", "LAST USED", "IP", "STATE"],
                sessions.map { s in
                    [
                        s["sessionId"] as? String ?? "", s["createdAt"] as? String ?? "", s["lastUsedAt"] as? String ?? "", s["ip"] as? String ?? "-",
                        (s["revokedAt"] as? String).map { "revoked \($0) (\(s["revokeReason"] as? String ?? ""))" } ?? "active",
                    ]
                })
        }
    }
}

struct SetClaims: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-claims",
        abstract: "Set a user's custom claims, in its access tokens from the next refresh on.",
        discussion: """
            JSON is an object of at most 1,000 bytes, e.g. '{"role":"admin"}'; '{}' or '' clears the claims. \
            Reserved names are refused: iss sub aud exp nbf iat jti sid auth_time amr email email_verified \
            is_anonymous azp acr nonce at_hash c_hash cnf scope typ client_id, and any name starting with gatehouse.
            """)
    @Argument(parsing: .captureForPassthrough, help: "ID JSON [FLAGS...]: the user's id (it may start with '-'), the claims, then configuration flags.")
    var words: [String] = []
    func run() async throws {
        let (id, rest) = try userArguments(words, Self.self)
        guard let json = rest.first else { throw ValidationError("Missing the claims: a JSON object, e.g. '{\"role\":\"admin\"}' ('{}' clears them).") }
        let cleared = json.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: " ", with: "")
        try await withAdminAPI(Array(rest.dropFirst())) { client in
            _ = try await client.call("PUT", "admin/v1/users/\(id)/claims", rawBody: Data((cleared.isEmpty ? "{}" : json).utf8))
            if cleared.isEmpty || cleared == "{}" { return "custom claims of user \(id) cleared; from its next refresh its access tokens carry none" }
            return "custom claims of user \(id) set; its access tokens carry them from its next refresh"
        }
    }
}

struct MakeLink: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "link", abstract: "Make a password-reset or verification link for a user without mailing it; prints the link (or the code).")
    @Argument(parsing: .captureForPassthrough, help: "ID --kind password-reset|verify-email [--json] [FLAGS...]") var words: [String] = []
    func run() async throws {
        var (id, json, rest) = try idAndFlags(words, Self.self)
        let kinds = ["password-reset": "passwordReset", "verify-email": "verifyEmail"]
        guard let given = try takeOption("--kind", from: &rest), let kind = kinds[given] else {
            throw ValidationError("--kind must be password-reset or verify-email.")
        }
        try await withAdminAPI(rest) { client in
            let reply = try await client.call("POST", "admin/v1/users/\(id)/links", body: ["kind": kind])
            if json { return UserText.json(reply) }
            return reply["link"] as? String ?? "code: \(reply["code"] as? String ?? "")"
        }
    }
}

/// The help of the words of a command about one user.
let userWordsHelp = ArgumentHelp(
    "ID [--json] [FLAGS...]: the user's id (the `id` of /v1/me; it may start with '-'), then configuration flags, e.g. --admin-url http://127.0.0.1:8081.")
