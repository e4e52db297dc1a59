import Crypto
import Foundation
import TokenPorts
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
        let stored = try await store.secret(named: TokenSecrets.successorName) {
            let raw = Data(random(TokenSecrets.plainLength))
            return (try? Self.seal(raw, with: key)) ?? raw
        }
        let isSealed = stored.count != TokenSecrets.plainLength
        let secret = try Self.open(stored, with: key, isSealed: isSealed, what: "the refresh secret")
        guard let key else { return secret }
        if !isSealed { try await store.replaceSecret(named: TokenSecrets.successorName, with: try Self.seal(secret, with: key)) }
        let sealed = try await store.sealPlaintextKeys { try Self.seal($0, with: key) }
        if sealed > 0 || !isSealed {
            try await store.scrubFreedPages()
            logger.notice("sealed \(sealed) signing key(s)\(isSealed ? "" : " and the refresh secret") stored in plain text with the key-encryption key")
        }
        return secret
    }
}
