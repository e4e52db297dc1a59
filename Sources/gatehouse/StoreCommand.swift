import ArgumentParser
import Foundation
import GatehouseApp
import Logging

struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Move a deployment's stores between SQLite and PostgreSQL.",
        subcommands: [Copy.self])

    struct Copy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy the token store from a data folder's token.sqlite into an empty PostgreSQL database.",
            discussion: """
                Stop the token service first. Copies signing keys and the refresh secret (sealed as they \
                are), sessions with their refresh tokens (every user stays signed in) and the audit log, in \
                one transaction; then checks the counts and 100 refresh tokens picked at random. Start the \
                token instances with GATEHOUSE_TOKEN_DATABASE_URL and the key-encryption key the SQLite \
                store used (GATEHOUSE_KEY_ENCRYPTION_KEY_FILE, or key-encryption.key in the data folder). \
                The identity service's store stays SQLite for now.
                """)
        @Option(help: "sqlite:DIR, the token service's data folder (it holds token.sqlite).")
        var from: String
        @Option(help: "postgres://user@host:5432/database?sslmode=verify-full")
        var to: String
        @Option(help: "A file whose first line is the database password.")
        var passwordFile: String?

        func run() async throws {
            umask(0o077)
            do {
                let folder = try StoreCopy.sqliteFolder(from)
                let logger = Logger(label: "gatehouse.store.copy", factory: { StreamLogHandler.standardError(label: $0) })
                let report = try await StoreCopy.copyTokens(from: folder, to: to, passwordFile: passwordFile, logger: logger)
                print("copied \(report.counts) from \(report.source) to \(report.target)")
                print("checked: the counts match, and \(report.sampled) refresh tokens picked at random find their sessions")
            } catch let error as ValidationError {
                throw error
            } catch {
                throw fail("store copy", "\(error)")
            }
        }
    }
}
