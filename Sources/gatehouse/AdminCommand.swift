import ArgumentParser
import Foundation
import GatehouseApp
import GatehouseContracts

/// `gatehouse admin keys create|list|revoke`: the admin API's keys, made and revoked through the
/// running identity service with its own key (the way in before any admin key exists).
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Administer the admin API (its keys) through the running identity service (GATEHOUSE_IDENTITY_URL).",
        subcommands: [Keys.self])

    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make, list and revoke admin API keys.",
            discussion: """
                Run with the identity service's configuration (with CURVE links, its own secret key), like \
                `gatehouse users import`. A key is shown once, at creation; only its hash is stored.
                """,
            subcommands: [Create.self, List.self, Revoke.self])
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a key: prints it once (gha_<id>.<secret>); keep it secret.",
            discussion: "Scopes: users:read, users:write, users:import, users:export, sessions, claims, audit, signing_keys, or all. Repeat --scope or separate them with commas.")
        @Argument(
            parsing: .captureForPassthrough,
            help: """
                --name NAME --scope SCOPE[,SCOPE] [--json] [--data-dir DIR] [FLAGS...]: then configuration flags, e.g. \
                --identity-url tcp://127.0.0.1:7001; --data-dir writes to DIR/identity.sqlite itself (for gatehouse serve).
                """)
        var words: [String] = []

        func run() async throws {
            var rest = words
            if rest.first == "--help" || rest.first == "-h" { throw CleanExit.helpRequest(Self.self) }
            let json = takeFlag("--json", from: &rest)
            guard let name = try takeOption("--name", from: &rest) else { throw ValidationError("Missing --name NAME.") }
            var scopes: [String] = []
            while let scope = try takeOption("--scope", from: &rest) { scopes += scope.split(separator: ",").map(String.init) }
            guard !scopes.isEmpty else { throw ValidationError("Missing --scope (users:read, users:write, users:import, users:export, sessions, claims, audit, signing_keys or all).") }
            let dataDir = try takeOption("--data-dir", from: &rest)
            try await withKeys(rest, dataDir: dataDir) { keys in
                let made = try await keys.create(name, scopes)
                if json { return AdminKeyText.json(made.key, token: made.token) }
                return """
                    \(made.token)
                    admin API key \(made.key.id) (\(made.key.name)) made with scopes \(made.key.scopes.joined(separator: ",")); \
                    this is the only time it is shown: store it as GATEHOUSE_ADMIN_KEY (or in GATEHOUSE_ADMIN_KEY_FILE)
                    """
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every key (never a secret), revoked ones included.")
        @Argument(parsing: .captureForPassthrough, help: "[--json] [--data-dir DIR] [FLAGS...]: configuration flags.") var words: [String] = []

        func run() async throws {
            var rest = words
            if rest.first == "--help" || rest.first == "-h" { throw CleanExit.helpRequest(Self.self) }
            let json = takeFlag("--json", from: &rest)
            let dataDir = try takeOption("--data-dir", from: &rest)
            try await withKeys(rest, dataDir: dataDir) { store in
                let keys = try await store.list()
                if json { return keys.map { AdminKeyText.json($0) }.joined(separator: "\n") }
                let rows = keys.map { key in
                    [
                        key.id, key.name, key.scopes.joined(separator: ","), AdminKeyText.time(key.createdAt),
                        key.lastUsedAt.map(AdminKeyText.time) ?? "-", key.revokedAt.map { "revoked " + AdminKeyText.time($0) } ?? "active",
                    ]
                }
                return TextTable.render(["ID", "NAME", "SCOPES", "CREATED", "LAST USED", "STATE"], rows)
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a key: its next request is refused.")
        @Argument(parsing: .captureForPassthrough, help: "ID [--data-dir DIR] [FLAGS...]: the key's id (the part after gha_ and before the dot).")
        var words: [String] = []

        func run() async throws {
            var (id, rest) = try userArguments(words, Self.self)
            let dataDir = try takeOption("--data-dir", from: &rest)
            try await withKeys(rest, dataDir: dataDir, id: id) { keys in
                let key = try await keys.revoke(id)
                return "admin API key \(key.id) (\(key.name)) revoked"
            }
        }
    }
}

/// The three key operations, on the running service (`AdminClient`) or on the database file.
struct KeyOperations {
    var create: (String, [String]) async throws -> CreateAdminKeyResponse
    var list: () async throws -> [AdminKey]
    var revoke: (String) async throws -> AdminKey
}

/// Runs `body` with the key operations of the running identity service, or of the database in
/// `dataDir` when given; prints what it returns, or the error on stderr and exits 1.
func withKeys(_ options: [String], dataDir: String?, id: String = "", _ body: (KeyOperations) async throws -> String) async throws {
    guard let dataDir else {
        try await withAdminClient(options, userID: id) { client in
            try await body(KeyOperations(create: client.createAdminKey, list: client.adminKeys, revoke: client.revokeAdminKey))
        }
        return
    }
    do {
        let file = try await AdminKeyFile(dataDir: dataDir)
        print(try await body(KeyOperations(create: file.create, list: file.list, revoke: file.revoke)))
    } catch {
        throw failed("error: \((error as? ConfigError)?.message ?? "\(error)")")
    }
}

/// How keys are printed.
enum AdminKeyText {
    static func time(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: date)
    }

    static func json(_ key: AdminKey, token: String? = nil) -> String {
        var object: [String: Any] = [
            "id": key.id, "name": key.name, "scopes": key.scopes, "createdAt": time(key.createdAt),
            "lastUsedAt": key.lastUsedAt.map(time) ?? NSNull(), "revokedAt": key.revokedAt.map(time) ?? NSNull(),
        ]
        if let token { object["key"] = token }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

/// A plain text table: a header and rows, columns padded to their widest cell.
enum TextTable {
    static func render(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
