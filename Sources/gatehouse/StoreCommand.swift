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
            abstract: "Copy a data folder's stores (token.sqlite, identity.sqlite) into an empty PostgreSQL database.",
            discussion: """
                Stop the service(s) first. The folder's token.sqlite: signing keys and the refresh secret \
                (sealed as they are), sessions with their refresh tokens (every user stays signed in) and the \
                audit log, checked by the counts and 100 refresh tokens picked at random. Its identity.sqlite: \
                every table as stored (users and password hashes, provider links, pending codes and mail, the \
                change log with its positions, the audit log, admin keys, Apple tokens), checked by the counts \
                of every table and 100 sign-ins picked at random. Each store is copied in one transaction. \
                Then start the token instances with GATEHOUSE_TOKEN_DATABASE_URL and the key-encryption key \
                the SQLite store used, the identity instances with GATEHOUSE_IDENTITY_DATABASE_URL.
                """)
        @Option(help: "sqlite:DIR, a data folder holding token.sqlite, identity.sqlite or both.")
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
                let present = StoreCopy.stores(in: folder)
                guard present.token || present.identity else {
                    throw StoreCopyFolderError("no token.sqlite or identity.sqlite in \(folder.path): --from names a data folder (sqlite:/data)")
                }
                // Both checked before either is copied: never one store moved and the other left.
                try await StoreCopy.checkTargets(folder: folder, to: to, passwordFile: passwordFile, logger: logger)
                if present.identity {
                    let report = try await StoreCopy.copyIdentity(from: folder, to: to, passwordFile: passwordFile, logger: logger)
                    print("copied \(report.copy) from \(report.source) to \(report.target)")
                    print("checked: the counts of every table match, and \(report.sampled) users picked at random sign in as stored")
                }
                if present.token {
                    let report = try await StoreCopy.copyTokens(from: folder, to: to, passwordFile: passwordFile, logger: logger)
                    print("copied \(report.counts) from \(report.source) to \(report.target)")
                    print("checked: the counts match, and \(report.sampled) refresh tokens picked at random find their sessions")
                }
            } catch let error as ValidationError {
                throw error
            } catch {
                throw fail("store copy", "\(error)")
            }
        }
    }
}

/// A data folder without a store to copy.
struct StoreCopyFolderError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
