import ArgumentParser
import Foundation
import GatehouseApp

/// `gatehouse keys`: CURVE key material for the service links.
struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the CURVE keys that secure links between the services, and the key that seals signing keys at rest.",
        subcommands: [Generate.self, RotateEncryptionKey.self])

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new key set: CURVE key pairs for identity, token and gateway, their allow lists, and a key-encryption key.",
            discussion: "Secret keys are written with mode 0600 and never printed. The file names match the docker-compose secrets. An existing key-encryption.key is never replaced (it seals the signing keys): rotate it with `gatehouse keys rotate-encryption-key`.")

        @Option(name: .long, help: "Folder to write the key set to (created with mode 0700 if missing).")
        var out: String

        @Flag(name: .long, help: "Replace existing CURVE key pairs and allow lists (link key rotation). An existing key-encryption.key is always kept.")
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

    struct RotateEncryptionKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-encryption-key",
            abstract: "Re-seal the token database's signing keys with a new key-encryption key.",
            discussion: "Stop the token service first. Opens the secrets with the old key (default: DATA_DIR/key-encryption.key) and seals them with the new one, in one transaction. With --old-key-lost, secrets that cannot be opened are deleted instead and new signing keys are made at the next start.")

        @Option(name: .long, help: "The data folder holding token.sqlite.")
        var dataDir: String

        @Option(name: .long, help: "File with the key the secrets are sealed with now (default: DATA_DIR/key-encryption.key).")
        var oldKeyFile: String?

        @Option(name: .long, help: "File with the new 32-byte key (raw, hex or base64), e.g. made by `head -c 32 /dev/urandom | base64`.")
        var newKeyFile: String

        @Flag(name: .long, help: "The old key is lost: delete what it sealed instead of failing.")
        var oldKeyLost = false

        func run() throws {
            do {
                print(try KeyEncryptionKey.rotate(dataDir: dataDir, oldKeyFile: oldKeyFile, newKeyFile: newKeyFile, oldKeyLost: oldKeyLost))
            } catch let error as ConfigError {
                FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
                throw ExitCode.failure
            }
        }
    }
}
