import ArgumentParser
import Foundation
import GatehouseApp

/// `gatehouse keys`: CURVE key material for the service links, the key-encryption key, and the
/// rotation of the JWT signing keys (through the admin API).
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the CURVE keys that secure links between the services, the key that seals signing keys at rest, and the JWT signing keys.",
        subcommands: [Generate.self, RotateEncryptionKey.self, RotateSigning.self])

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
                throw failed("error: \(error.description)")
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
                throw failed("error: \(error.message)")
            }
        }
    }
}

/// `gatehouse keys rotate-signing`: the admin API's `POST /admin/v1/signing-keys/rotate`
/// (GATEHOUSE_ADMIN_URL, an admin key with the `signing_keys` scope).
struct RotateSigning: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-signing",
        abstract: "Make a new JWT signing key through the admin API (GATEHOUSE_ADMIN_URL, GATEHOUSE_ADMIN_KEY with the signing_keys scope).",
        discussion: """
            The token service publishes the new key in the JWKS at once and signs with it from the time printed \
            (at once with one token instance; two GATEHOUSE_KEY_SYNC_INTERVALs and a second later with several). \
            The key it replaces stays published until its last access token has expired. --json prints the admin API's answer.
            """)
    @Argument(parsing: .captureForPassthrough, help: "[--json] [FLAGS...]") var words: [String] = []

    func run() async throws {
        var rest = words
        if rest.first == "--help" || rest.first == "-h" { throw CleanExit.helpRequest(Self.self) }
        let json = takeFlag("--json", from: &rest)
        try await withAdminAPI(rest) { client in
            let reply = try await client.call("POST", "admin/v1/signing-keys/rotate")
            if json { return UserText.json(reply) }
            var lines = [
                "new signing key: \(reply["kid"] as? String ?? "")",
                "signs from: \(reply["activatesAt"] as? String ?? "")",
            ]
            if let previous = reply["previousKid"] as? String {
                lines.append("previous key: \(previous), published until \(reply["previousRetiresAt"] as? String ?? "-")")
            }
            lines.append("published keys: \((reply["publishedKids"] as? [String] ?? []).joined(separator: ", "))")
            return lines.joined(separator: "\n")
        }
    }
}
