import ArgumentParser
import Foundation
import GatehouseApp

/// `gatehouse users disable|enable|delete|set-claims|import|export`: administrative calls to the
/// running identity service (`AdminClient`); import and export print their own report. One line on stdout and exit 0 on success; one line on stderr and
/// exit 1 on an error.
struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Administer users through the running identity service (GATEHOUSE_IDENTITY_URL).",
        discussion: """
            Run with the identity service's configuration: with CURVE links, its own secret key \
            (GATEHOUSE_CURVE_SECRET_KEY_FILE), the only key its administrative methods accept; without \
            keys, a tcp endpoint needs GATEHOUSE_ALLOW_PLAINTEXT=true. Not available under `gatehouse serve`, \
            whose services have no endpoint outside the process.
            """,
        subcommands: [DisableUser.self, EnableUser.self, DeleteUser.self, SetClaims.self, ImportUsers.self, ExportUsers.self]
    )
}

/// Runs `body` with a client configured by `options`, printing its one-line result, or the
/// error on stderr and exiting 1.
func withAdminClient(_ options: [String], userID: String, _ body: (AdminClient) async throws -> String) async throws {
    let client: AdminClient
    do {
        client = try AdminClient(config: try Config(arguments: options))
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        throw ExitCode(1)
    }
    let result: Result<String, any Error>
    do { result = .success(try await body(client)) } catch { result = .failure(error) }
    await client.close()
    switch result {
    case .success(let line): print(line)
    case .failure(let error):
        FileHandle.standardError.write(Data("\(client.describe(error, userID: userID))\n".utf8))
        throw ExitCode(1)
    }
}

/// The user id (the first word, whatever it starts with: base64url ids may start with '-') and
/// the configuration flags after it. `--help`/`-h` first asks for `command`'s help.
func userArguments<C: ParsableCommand>(_ words: [String], _ command: C.Type) throws -> (id: String, rest: [String]) {
    var words = words
    if words.first == "--" { words.removeFirst() }
    guard let id = words.first else { throw ValidationError("Missing the user's id (the `id` of /v1/me).") }
    if id == "--help" || id == "-h" { throw CleanExit.helpRequest(command) }
    return (id, Array(words.dropFirst()))
}

/// A `gatehouse users ACTION ID [FLAGS...]` command: `words` holds the id and the flags, and
/// `act` makes the one call and says what it did.
protocol UserCommand: AsyncParsableCommand {
    var words: [String] { get }
    /// Calls the identity service about the user `id`; the line printed on success.
    func act(_ client: AdminClient, _ id: String) async throws -> String
}

extension UserCommand {
    func run() async throws {
        let (id, options) = try userArguments(words, Self.self)
        try await withAdminClient(options, userID: id) { client in try await act(client, id) }
    }
}

/// The help of the words of a `UserCommand`.
let userWordsHelp = ArgumentHelp(
    "ID [FLAGS...]: the user's id (the `id` of /v1/me, the `sub` of its tokens; it may start with '-'), then configuration flags, e.g. --identity-url tcp://127.0.0.1:7001.")

struct DisableUser: UserCommand {
    static let configuration = CommandConfiguration(
        commandName: "disable",
        abstract: "Disable a user: sign-in answers user_disabled, and every session is revoked (refresh and access tokens refused).")
    @Argument(parsing: .captureForPassthrough, help: userWordsHelp) var words: [String] = []
    func act(_ client: AdminClient, _ id: String) async throws -> String {
        let user = try await client.setDisabled(userID: id, disabled: true)
        return "user \(user.id) disabled; its sessions are revoked"
    }
}

struct EnableUser: UserCommand {
    static let configuration = CommandConfiguration(
        commandName: "enable", abstract: "Enable a disabled user again (it signs in anew; revoked sessions stay revoked).")
    @Argument(parsing: .captureForPassthrough, help: userWordsHelp) var words: [String] = []
    func act(_ client: AdminClient, _ id: String) async throws -> String {
        let user = try await client.setDisabled(userID: id, disabled: false)
        return "user \(user.id) enabled"
    }
}

struct DeleteUser: UserCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete a user: its row and linked identities are removed and every session is revoked (refresh and access tokens refused); the email can register again.")
    @Argument(parsing: .captureForPassthrough, help: userWordsHelp) var words: [String] = []
    func act(_ client: AdminClient, _ id: String) async throws -> String {
        try await client.deleteUser(userID: id)
        return "user \(id) deleted; its sessions are revoked"
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
    @Argument(
        parsing: .captureForPassthrough,
        help: "ID JSON [FLAGS...]: the user's id (it may start with '-'), the claims (a JSON object), then configuration flags, e.g. --identity-url tcp://127.0.0.1:7001.")
    var words: [String] = []
    func run() async throws {
        let (id, rest) = try userArguments(words, Self.self)
        guard let json = rest.first else { throw ValidationError("Missing the claims: a JSON object, e.g. '{\"role\":\"admin\"}' ('{}' clears them).") }
        let options = Array(rest.dropFirst())
        try await withAdminClient(options, userID: id) { client in
            let user = try await client.setCustomClaims(userID: id, claimsJSON: json)
            let cleared = json.trimmingCharacters(in: .whitespacesAndNewlines)
            if cleared.isEmpty || cleared.replacingOccurrences(of: " ", with: "") == "{}" {
                return "custom claims of user \(user.id) cleared; from its next refresh its access tokens carry none"
            }
            return "custom claims of user \(user.id) set; its access tokens carry them from its next refresh"
        }
    }
}
