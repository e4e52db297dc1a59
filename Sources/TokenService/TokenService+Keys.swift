import Crypto
import Foundation
import GatehouseContracts
import TokenCore

extension TokenService {
    // MARK: Keys

    static func seal(_ data: Data, with key: SymmetricKey?) throws -> Data {
        guard let key else { return data }
        guard let combined = try AES.GCM.seal(data, using: key).combined else { throw RPCError(.internal, "sealing failed") }
        return combined
    }

    static func open(_ data: Data, with key: SymmetricKey?, isSealed: Bool, what: String) throws -> Data {
        guard isSealed else { return data }
        guard let key else {
            throw RPCError(.internal, "\(what) is encrypted at rest; configure the key-encryption key (GATEHOUSE_KEY_ENCRYPTION_KEY_FILE)")
        }
        do { return try AES.GCM.open(AES.GCM.SealedBox(combined: data), using: key) } catch {
            throw RPCError(.internal, "\(what) does not decrypt with the configured key-encryption key")
        }
    }

    /// Loads the published keys from the store, generating the first key on first start (one
    /// first key however many instances start together). Returns when the next stored key starts
    /// signing, if one is waiting: load again then.
    @discardableResult
    func loadKeys() async throws -> Date? {
        var stored = try await store.keys()
        if stored.isEmpty {
            let key = try newKey(activatesAt: clock.now)
            if try await store.insertFirstKey(key.stored) { logger.info("first signing key \(key.kid) (\(key.algorithm))") }
            stored = try await store.keys()
        }
        let at = clock.now
        // The key signing at `at`: the latest activated one that has not stopped. A key activating
        // later is published (verifies, in the JWKS) but does not sign yet.
        // With none activated yet (a first key made by an instance whose clock runs ahead of this
        // one's), the first to activate signs.
        let signing = stored.filter { $0.activatesAt <= at && ($0.signingUntil.map { $0 > at } ?? true) }
            .max { ($0.activatesAt, $0.createdAt) < ($1.activatesAt, $1.createdAt) }
            ?? stored.filter { $0.retireAfter.map { $0 > at } ?? true }.min { $0.activatesAt < $1.activatesAt }
        var active: SigningKey?
        var others: [KeyRing.Entry] = []
        var nextActivation: Date?
        for row in stored {
            if let retire = row.retireAfter, retire <= at { continue }
            guard let algorithm = SigningAlgorithm(rawValue: row.algorithm) else { continue }
            let material = try Self.open(row.privateKey, with: configuration.encryptionKey, isSealed: row.encrypted, what: "signing key \(row.kid)")
            let key = try SigningKey(algorithm: algorithm, privateMaterial: String(decoding: material, as: UTF8.self))
            if row.kid == signing?.kid { active = key } else { others.append(KeyRing.Entry(key: key, retireAfter: row.retireAfter)) }
            if row.activatesAt > at { nextActivation = min(nextActivation ?? row.activatesAt, row.activatesAt) }
        }
        guard let active else { throw RPCError(.internal, "no active signing key") }
        try await keys.load(active: active, others: others)
        pendingActivation.withLock { $0 = nextActivation }
        return nextActivation
    }

    /// Loads the signing keys from the store again (`KeySync`): keys another instance added are
    /// published, and a key whose activation has come signs. Returns when the next one activates.
    public func reloadKeys() async throws -> Date? { try await loadKeys() }

    /// When the next published key starts signing, as of the last load (nil: none waiting).
    public var nextKeyActivation: Date? { pendingActivation.withLock { $0 } }

    /// A new key of the configured algorithm, sealed for the store, signing from `activatesAt`.
    func newKey(activatesAt: Date) throws -> (stored: TokenStore.StoredKey, kid: String, algorithm: String) {
        let key = try SigningKey.generate(configuration.algorithm)
        let sealed = try Self.seal(Data(key.privateMaterial.utf8), with: configuration.encryptionKey)
        return (
            TokenStore.StoredKey(
                kid: key.kid, algorithm: key.algorithm.rawValue, privateKey: sealed, encrypted: configuration.encryptionKey != nil,
                createdAt: clock.now, activatesAt: activatesAt),
            key.kid, key.algorithm.rawValue
        )
    }

    /// Makes a new signing key; the previous one stays published until its last token expires.
    ///
    /// With several instances (`keyActivationDelay` > 0) the new key is published at once and
    /// signs only after the delay, by which time every instance has loaded it (`KeySync`): no
    /// instance signs with a key another one does not publish. The reply's `kid` is the new key.
    public func rotateKeys() async throws -> RotateKeysResponse {
        let previous = keys.activeKid
        let activatesAt = clock.now.addingTimeInterval(configuration.keyActivationDelay)
        let key = try newKey(activatesAt: activatesAt)
        try await store.insertKey(key.stored, previousRetireAfter: activatesAt.addingTimeInterval(configuration.accessTokenTTL + configuration.leeway))
        logger.info("new signing key \(key.kid) (\(key.algorithm)), signing from \(activatesAt)")
        try await loadKeys()
        return RotateKeysResponse(
            kid: key.kid, previousKid: previous,
            previousRetiresAt: activatesAt.addingTimeInterval(configuration.accessTokenTTL + configuration.leeway))
    }
}
