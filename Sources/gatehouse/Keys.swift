import ArgumentParser
import Foundation
import GatehouseApp

/// `gatehouse keys`: CURVE key material for the service links.
struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the CURVE keys that secure links between the services.",
        subcommands: [Generate.self])

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new key set: CURVE key pairs for identity, token and gateway, their allow lists, and a key-encryption key.",
            discussion: "Secret keys are written with mode 0600 and never printed. The file names match the docker-compose secrets.")

        @Option(name: .long, help: "Folder to write the key set to (created with mode 0700 if missing).")
        var out: String

        @Flag(name: .long, help: "Replace an existing key set.")
        var force = false

        func run() throws {
            let directory = URL(fileURLWithPath: out)
            do {
                let written = try KeySet.generate(into: directory, force: force)
                print(KeySet.report(written, directory: directory))
            } catch let error as KeySet.Error {
                FileHandle.standardError.write(Data("error: \(error.description)\n".utf8))
                throw ExitCode.failure
            }
        }
    }
}
