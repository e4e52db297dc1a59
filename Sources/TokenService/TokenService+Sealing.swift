import Crypto
import Foundation
import GatehouseContracts
import Logging

extension TokenService {
    /// The refresh-successor secret, made on first start. With a key-encryption key, secrets
    /// still stored in plain text (a database from before the key was configured) are sealed
    /// first, so none stays readable in the file.
    static func openSecrets(
        _ store: any TokenStorage, configuration: TokenConfiguration, random: @escaping @Sendable (Int) -> [UInt8], logger: Logger
    ) async throws -> Data {
        let key = configuration.encryptionKey
        let stored = try await store.secret(named: TokenStore.successorSecretName) {
            let raw = Data(random(TokenStore.plainSecretLength))
            return (try? Self.seal(raw, with: key)) ?? raw
        }
        let isSealed = stored.count != TokenStore.plainSecretLength
        let secret = try Self.open(stored, with: key, isSealed: isSealed, what: "the refresh secret")
        guard let key else { return secret }
        if !isSealed { try await store.replaceSecret(named: TokenStore.successorSecretName, with: try Self.seal(secret, with: key)) }
        let sealed = try await store.sealPlaintextKeys { try Self.seal($0, with: key) }
        if sealed > 0 || !isSealed {
            try await store.scrubFreedPages()
            logger.notice("sealed \(sealed) signing key(s)\(isSealed ? "" : " and the refresh secret") stored in plain text with the key-encryption key")
        }
        return secret
    }

    /// Re-seals the secrets of the token database at `databasePath` with `newKey`, opening them
    /// with `oldKey` (nil: they may be plain text). See `TokenStore.rewrap`.
    public static func rotateEncryptionKey(
        databasePath: String, oldKey: SymmetricKey?, newKey: SymmetricKey, discardUnreadable: Bool
    ) throws -> TokenStore.RewrapReport {
        try TokenStore.rewrap(
            path: databasePath, discardUnreadable: discardUnreadable,
            open: { sealed, isSealed in
                guard isSealed else { return sealed }
                guard let oldKey, let box = try? AES.GCM.SealedBox(combined: sealed) else { return nil }
                return try? AES.GCM.open(box, using: oldKey)
            },
            seal: { try Self.seal($0, with: newKey) })
    }
}
