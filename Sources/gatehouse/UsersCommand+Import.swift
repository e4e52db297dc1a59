import ArgumentParser
import Foundation
import GatehouseApp

/// Takes `--name VALUE` or `--name=VALUE` out of `words`; nil when absent.
func takeOption(_ name: String, from words: inout [String]) throws -> String? {
    guard let index = words.firstIndex(where: { $0 == name || $0.hasPrefix(name + "=") }) else { return nil }
    let word = words.remove(at: index)
    if word.count > name.count { return String(word.dropFirst(name.count + 1)) }
    guard index < words.count else { throw ValidationError("\(name) needs a value.") }
    return words.remove(at: index)
}

/// Takes the flag `name` out of `words`; whether it was there.
func takeFlag(_ name: String, from words: inout [String]) -> Bool {
    guard let index = words.firstIndex(of: name) else { return false }
    words.remove(at: index)
    return true
}

/// The configuration of `options`, or the error on stderr and exit 1.
func cliConfig(_ options: [String]) throws -> Config {
    do { return try Config(arguments: options) } catch {
        throw failed("error: \(error)")
    }
}

/// An admin API client for `options`, or the error on stderr and exit 1.
func adminAPI(_ options: [String]) throws -> AdminAPIClient {
    do { return try AdminAPIClient(config: try Config(arguments: options)) } catch {
        throw failed("error: \(error)")
    }
}

/// A client of the identity service's RPC link for `options`, or the error on stderr and exit 1.
func adminClient(_ options: [String]) throws -> AdminClient {
    do { return try AdminClient(config: try Config(arguments: options)) } catch {
        throw failed("error: \(error)")
    }
}

struct ImportUsers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import users from a jsonl file or a `firebase auth:export` file (docs/operators/import-export.md).",
        discussion: """
            With an admin API key (GATEHOUSE_ADMIN_KEY or GATEHOUSE_ADMIN_KEY_FILE, scope users:import) it goes \
            through the admin API (GATEHOUSE_ADMIN_URL): any deployment, gatehouse serve included; without one, \
            straight to the identity service (GATEHOUSE_IDENTITY_URL, with its own link key). \
            FILE is read as a stream and sent in batches of 1,000. Prints one line per refused record \
            (`line N: reason (code)`) and a summary; exits 0 when no record was refused, 1 otherwise. \
            Running it again is safe: existing users (same id, else same email) are skipped, or \
            overwritten with --mode update. Firebase passwords need the project's hash parameters \
            (console: Authentication, Users, Password hash parameters).
            """)
    @Argument(
        parsing: .captureForPassthrough,
        help: """
            FILE [--mode skip|update] [--format jsonl|firebase] [--hash-key B64 --salt-separator B64 --rounds N --mem-cost N] \
            [FLAGS...]: the file (- for standard input), then configuration flags, e.g. --identity-url tcp://127.0.0.1:7001.
            """)
    var words: [String] = []

    func run() async throws {
        var rest = words
        if rest.first == "--" { rest.removeFirst() }
        if rest.first == "--help" || rest.first == "-h" { throw CleanExit.helpRequest(Self.self) }
        guard !rest.isEmpty else { throw ValidationError("Missing the file to import (- for standard input).") }
        let path = rest.removeFirst()
        let mode = try takeOption("--mode", from: &rest) ?? "skip"
        guard mode == "skip" || mode == "update" else { throw ValidationError("--mode must be skip or update.") }
        let formatName = try takeOption("--format", from: &rest) ?? "jsonl"
        guard let format = UserImportFormat(rawValue: formatName) else { throw ValidationError("--format must be jsonl or firebase.") }
        let firebase = try firebaseParameters(&rest)
        if firebase != nil, format != .firebase { throw ValidationError("--hash-key and its companions are for --format firebase.") }
        let file: UserImportFile
        do { file = try UserImportFile(path: path, format: format, firebase: firebase) } catch {
            throw failed("error: \(error)")
        }
        let result: Result<ImportSummary, any Error>
        let describe: (any Error) -> String
        if try cliConfig(rest).hasAdminKey {
            let api = try adminAPI(rest)
            describe = { "\($0)" }
            do {
                result = .success(try await api.importUsers(from: file, mode: mode) { line in print(line) })
            } catch { result = .failure(error) }
        } else {
            let client = try adminClient(rest)
            describe = { client.describe($0, userID: "") }
            do {
                result = .success(try await client.importUsers(from: file, mode: mode) { line in print(line) })
            } catch { result = .failure(error) }
            await client.close()
        }
        switch result {
        case .success(let summary):
            print(summary.line)
            if summary.failed > 0 { throw ExitCode(1) }
        case .failure(let error):
            throw failed("\(describe(error)) (the batches before it were imported; run the import again)")
        }
    }

    /// The Firebase hash parameters: all four flags or none.
    func firebaseParameters(_ rest: inout [String]) throws -> FirebaseHashParameters? {
        let key = try takeOption("--hash-key", from: &rest), separator = try takeOption("--salt-separator", from: &rest)
        let rounds = try takeOption("--rounds", from: &rest), memCost = try takeOption("--mem-cost", from: &rest)
        let given = [key, separator, rounds, memCost].compactMap { $0 }
        if given.isEmpty { return nil }
        guard let key, let separator, let rounds, let memCost else {
            throw ValidationError("Give all of --hash-key, --salt-separator, --rounds and --mem-cost (the project's password hash parameters).")
        }
        guard let r = Int(rounds), let m = Int(memCost) else { throw ValidationError("--rounds and --mem-cost must be integers.") }
        guard let parameters = FirebaseHashParameters(signerKeyBase64: key, saltSeparatorBase64: separator, rounds: r, memCost: m) else {
            throw ValidationError("--hash-key and --salt-separator must be base64, as the Firebase console shows them.")
        }
        return parameters
    }
}

struct ExportUsers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export every user as jsonl (the import format), in id order; password hashes only with --include-hashes.",
        discussion: """
            With an admin API key (GATEHOUSE_ADMIN_KEY or GATEHOUSE_ADMIN_KEY_FILE, scope users:export) it goes through the \
            admin API (GATEHOUSE_ADMIN_URL): any deployment, gatehouse serve included; without one, straight to the identity \
            service (GATEHOUSE_IDENTITY_URL, with its own link key). FILE is created with mode 0600 (it may hold password \
            hashes); without FILE or with -, the users go to standard output.
            """)
    @Argument(
        parsing: .captureForPassthrough,
        help: "[FILE|-] [--include-hashes] [FLAGS...]: where to write, then configuration flags, e.g. --identity-url tcp://127.0.0.1:7001.")
    var words: [String] = []

    func run() async throws {
        var rest = words
        if rest.first == "--" { rest.removeFirst() }
        if rest.first == "--help" || rest.first == "-h" { throw CleanExit.helpRequest(Self.self) }
        let includeHashes = takeFlag("--include-hashes", from: &rest)
        var path = "-"
        if let first = rest.first, first == "-" || !first.hasPrefix("-") { path = rest.removeFirst() }
        // A new file only (never an existing one, never through a symbolic link), 0600 from the
        // start: with --include-hashes it holds every password hash.
        let output = path == "-" ? FileHandle.standardOutput : try newPrivateFile(path)
        let result: Result<Int, any Error>
        let describe: (any Error) -> String
        let write = { (text: String) throws in try output.write(contentsOf: Data(text.utf8)) }
        if try cliConfig(rest).hasAdminKey {
            let api = try adminAPI(rest)
            describe = { "\($0)" }
            do { result = .success(try await api.exportUsers(includeHashes: includeHashes, write: write)) } catch { result = .failure(error) }
        } else {
            let client = try adminClient(rest)
            describe = { client.describe($0, userID: "") }
            do { result = .success(try await client.exportUsers(includeHashes: includeHashes, write: write)) } catch { result = .failure(error) }
            await client.close()
        }
        if path != "-" { try? output.close() }
        switch result {
        case .success(let count):
            FileHandle.standardError.write(Data("exported \(count) users\n".utf8))
        case .failure(let error):
            throw failed(describe(error))
        }
    }
}
