import ArgumentParser
import Foundation
import GatehouseApp

/// `gatehouse audit tail|export`: the audit logs of the running identity and token services,
/// merged by time (`AuditReader`).
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Read the audit log of the running identity and token services.",
        discussion: """
            With an admin API key (GATEHOUSE_ADMIN_KEY or GATEHOUSE_ADMIN_KEY_FILE, scope audit) it reads through the \
            admin API (GATEHOUSE_ADMIN_URL): any deployment, gatehouse serve included. Without one it calls the \
            services themselves (GATEHOUSE_IDENTITY_URL, GATEHOUSE_TOKEN_URL) with the identity service's \
            configuration: with CURVE links, its own secret key (GATEHOUSE_CURVE_SECRET_KEY_FILE) and \
            GATEHOUSE_TOKEN_PUBLIC_KEY_FILE; without keys, tcp endpoints need GATEHOUSE_ALLOW_PLAINTEXT=true. \
            --data-dir reads the database files instead. Events never hold a password, hash, code or token.
            """,
        subcommands: [Tail.self, Export.self])

    /// The options both commands share, taken out of `words`; the rest are configuration flags.
    struct Selection {
        var userID = ""
        var since: Date?
        var options: [String] = []

        init(_ words: [String], defaultSince: Date?) throws {
            var rest = words
            if rest.first == "--" { rest.removeFirst() }
            userID = try takeOption("--user", from: &rest) ?? ""
            guard userID.utf8.count <= 128 else { throw ValidationError("--user must be a user id (at most 128 bytes).") }
            if let text = try takeOption("--since", from: &rest) {
                since = try Self.instant(text)
            } else {
                since = defaultSince
            }
            options = rest
        }

        /// An RFC 3339 time, or a duration back from now (`30m`, `24h`, `7d`).
        static func instant(_ text: String) throws -> Date {
            let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
            if let unit = text.last, let seconds = units[unit], let count = Double(text.dropLast()), count >= 0, count * seconds <= 3.2e9 {
                return Date().addingTimeInterval(-count * seconds)
            }
            let formatter = ISO8601DateFormatter()
            if let date = formatter.date(from: text) { return date }
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            if let date = formatter.date(from: text) { return date }
            throw ValidationError("--since must be an RFC 3339 time (2026-11-27T10:00:00Z) or a duration back from now (30m, 24h, 7d; at most 100 years).")
        }
    }

    /// A reader for `options` (`--data-dir DIR`: the database files), or the error on stderr and exit 1.
    static func reader(_ options: [String]) throws -> AuditReader {
        var options = options
        do {
            if let dataDir = try takeOption("--data-dir", from: &options) { return try AuditReader(dataDir: dataDir) }
            let config = try Config(arguments: options)
            if config.hasAdminKey { return AuditReader(api: try AdminAPIClient(config: config)) }
            return try AuditReader(config: config)
        } catch {
            throw failed("error: \(error)")
        }
    }

    struct Tail: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the audit events of the last 24 hours (or --since), oldest first; with --follow, new ones as they come.",
            discussion: "One line per event: time, service, kind, then name=value for each field set; --json prints each as a JSON object instead.")
        @Argument(
            parsing: .captureForPassthrough,
            help: """
                [--user ID] [--since TIME|DURATION] [--follow] [--json] [--data-dir DIR] [FLAGS...]: then configuration flags, \
                e.g. --identity-url tcp://127.0.0.1:7001; --data-dir reads the database files (gatehouse serve).
                """)
        var words: [String] = []

        func run() async throws {
            if words.first == "--help" || words.first == "-h" { throw CleanExit.helpRequest(Self.self) }
            var rest = words
            let follow = takeFlag("--follow", from: &rest)
            let json = takeFlag("--json", from: &rest)
            let selection = try Selection(rest, defaultSince: Date().addingTimeInterval(-86_400))
            let reader = try AuditCommand.reader(selection.options)
            do {
                var cursor = AuditReader.Cursor()
                repeat {
                    cursor = try await reader.read(after: cursor, userID: selection.userID, since: selection.since) { entry in
                        print(json ? AuditReader.jsonLine(entry) : AuditReader.textLine(entry))
                    }
                    fflush(nil)
                    if follow { try await Task.sleep(for: .seconds(1)) }
                } while follow
            } catch {
                await reader.close()
                throw failed(reader.describe(error))
            }
            await reader.close()
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write every kept audit event (or those of --user, --since) as JSON lines, oldest first.",
            discussion: "FILE is created new with mode 0600 (never through a symbolic link); - or nothing writes to standard output.")
        @Argument(
            parsing: .captureForPassthrough,
            help: "[FILE|-] [--user ID] [--since TIME|DURATION] [--data-dir DIR] [FLAGS...]: then configuration flags, e.g. --identity-url tcp://127.0.0.1:7001.")
        var words: [String] = []

        func run() async throws {
            var rest = words
            if rest.first == "--" { rest.removeFirst() }
            if rest.first == "--help" || rest.first == "-h" { throw CleanExit.helpRequest(Self.self) }
            var path = "-"
            if let first = rest.first, first == "-" || !first.hasPrefix("-") { path = rest.removeFirst() }
            let selection = try Selection(rest, defaultSince: nil)
            let output = path == "-" ? FileHandle.standardOutput : try newPrivateFile(path)
            let reader = try AuditCommand.reader(selection.options)
            var count = 0
            do {
                _ = try await reader.read(after: AuditReader.Cursor(), userID: selection.userID, since: selection.since) { entry in
                    output.write(Data((AuditReader.jsonLine(entry) + "\n").utf8))
                    count += 1
                }
            } catch {
                await reader.close()
                throw failed(reader.describe(error))
            }
            await reader.close()
            if path != "-" {
                try? output.close()
                print("exported \(count) audit events to \(path)")
            }
        }
    }
}

/// `path` created new for writing (never an existing file, never through a symbolic link), 0600
/// from the start; else the error on stderr and exit 1.
func newPrivateFile(_ path: String) throws -> FileHandle {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else {
        throw failed("error: cannot create \(path): \(String(cString: strerror(errno))) (the file must not exist yet)")
    }
    return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
}
