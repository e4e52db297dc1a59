import ArgumentParser
import Foundation
import GatehouseApp

/// `gatehouse users ...`: the admin API (`AdminAPIClient`: GATEHOUSE_ADMIN_URL and an admin key)
/// for list, get, create, update, disable, enable, delete, revoke-sessions, sessions, set-claims and
/// link; import and export call the identity service with its own key (`AdminClient`) and print
/// their own report. Output on stdout and exit 0 on success; one line on stderr and exit 1 on an error.
struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Administer users through the admin API (GATEHOUSE_ADMIN_URL, GATEHOUSE_ADMIN_KEY).",
        discussion: """
            Every command but import and export calls the admin listener with an admin API key \
            (`gatehouse admin keys create --name NAME --scope all`); tables by default, --json for scripts. \
            import and export call the identity service (GATEHOUSE_IDENTITY_URL) with its configuration: \
            with CURVE links, its own secret key; without keys, a tcp endpoint needs GATEHOUSE_ALLOW_PLAINTEXT=true.
            """,
        subcommands: [
            ListUsers.self, GetUser.self, CreateUser.self, UpdateUser.self, DisableUser.self, EnableUser.self, DeleteUser.self,
            RevokeSessions.self, UserSessions.self, SetClaims.self, MakeLink.self, ImportUsers.self, ExportUsers.self,
        ]
    )
}

/// Runs `body` with a client configured by `options`, printing its one-line result, or the
/// error on stderr and exiting 1.
func withAdminClient(_ options: [String], userID: String, _ body: (AdminClient) async throws -> String) async throws {
    let client = try adminClient(options)
    let result: Result<String, any Error>
    do { result = .success(try await body(client)) } catch { result = .failure(error) }
    await client.close()
    switch result {
    case .success(let line): print(line)
    case .failure(let error):
        throw failed(client.describe(error, userID: userID))
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

