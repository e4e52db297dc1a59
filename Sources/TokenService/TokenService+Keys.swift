import Crypto
import Foundation
import TokenPorts
import GatehouseContracts
import GatehouseSupport
import Logging
import Synchronization
import TokenCore

extension TokenService {
    // MARK: Keys

    /// `data` sealed with `key` (`SecretSealing`); `data` itself without a key.
    static func seal(_ data: Data, with key: SymmetricKey?) throws -> Data {
        do { return try SecretSealing.seal(data, with: key) } catch { throw RPCError(.internal, "sealing failed") }
    }

    static func open(_ data: Data, with key: SymmetricKey?, isSealed: Bool, what: String) throws -> Data {
        guard isSealed else { return data }
        guard let key else {
            throw RPCError(.internal, "\(what) is encrypted at rest; configure the key-encryption key (GATEHOUSE_KEY_ENCRYPTION_KEY_FILE)")
        }
        guard let opened = SecretSealing.open(data, with: key) else {
            throw RPCError(.internal, "\(what) does not decrypt with the configured key-encryption key")
        }
        return opened
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
        newestKeyCreatedAt.withLock { $0 = stored.map(\.createdAt).max() }
        return nextActivation
    }

    /// Loads the signing keys from the store again (`KeySync`): keys another instance added are
    /// published, and a key whose activation has come signs. Returns when the next one activates.
    public func reloadKeys() async throws -> Date? { try await loadKeys() }

    /// When the next published key starts signing, as of the last load (nil: none waiting).
    public var nextKeyActivation: Date? { pendingActivation.withLock { $0 } }

    /// A new key of the configured algorithm, sealed for the store, signing from `activatesAt`.
    func newKey(activatesAt: Date) throws -> (stored: StoredSigningKey, kid: String, algorithm: String) {
        let key = try SigningKey.generate(configuration.algorithm)
        let sealed = try Self.seal(Data(key.privateMaterial.utf8), with: configuration.encryptionKey)
        return (
            StoredSigningKey(
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
    /// The rotation is audited (`signing_key.rotated`) with `actor` in the transaction that stores
    /// the key.
    public func rotateKeys(actor: String = AuditEvent.Actor.operator) async throws -> RotateKeysResponse {
        // Always made: `ifNewestBefore` is nil.
        try await rotate(actor: actor, reason: "", ifNewestBefore: nil)!
    }

    /// `token.rotateKeys`: `actor` "" is the operator (the service's own key), else an admin key.
    func rotateKeys(_ request: RotateKeysRequest) async throws -> RotateKeysResponse {
        if request.actor.isEmpty { return try await rotateKeys() }
        let prefix = "admin_key:"
        let id = request.actor.utf8.dropFirst(prefix.utf8.count)
        guard request.actor.hasPrefix(prefix), (1...64).contains(id.count), id.allSatisfy(\.isBase64URL) else {
            throw TokenError.invalidArgument("actor: \"\" (the operator) or admin_key:<id>, the id 1 to 64 base64url characters")
        }
        return try await rotateKeys(actor: request.actor)
    }

    /// The scheduled rotation (`GATEHOUSE_SIGNING_KEY_ROTATION_DAYS`): when the newest key was made
    /// more than `configuration.keyRotationInterval` ago, a new one. The store decides, in the
    /// transaction that adds the key, so instances sharing it whose schedules fall due together
    /// make one key. Nil when not due (or another instance rotated first: its key is loaded).
    /// The check against the keys in memory costs no store access while nothing is due.
    @discardableResult
    public func rotateKeysIfDue() async throws -> RotateKeysResponse? {
        guard let interval = configuration.keyRotationInterval else { return nil }
        let cutoff = clock.now.addingTimeInterval(-interval)
        guard let newest = newestKeyCreatedAt.withLock({ $0 }), newest < cutoff else { return nil }
        guard let rotated = try await rotate(actor: AuditEvent.Actor.system, reason: "scheduled", ifNewestBefore: cutoff) else {
            try await loadKeys()  // another instance rotated: publish its key here now
            return nil
        }
        return rotated
    }

    /// Makes, stores (with its audit event) and loads a new key; nil when the store found a key
    /// made at or after `cutoff` and added none.
    func rotate(actor: String, reason: String, ifNewestBefore cutoff: Date?) async throws -> RotateKeysResponse? {
        let previous = keys.activeKid
        let now = clock.now
        let activatesAt = now.addingTimeInterval(configuration.keyActivationDelay)
        let retiresAt = activatesAt.addingTimeInterval(configuration.accessTokenTTL + configuration.leeway)
        let key = try newKey(activatesAt: activatesAt)
        var detail = JSONObjectWriter()
        detail.string("kid", key.kid)
        detail.string("previousKid", previous)
        detail.int("activatesAt", Int(activatesAt.timeIntervalSince1970 * 1000))
        let event = AuditEvent(
            occurredAt: now, kind: AuditEvent.Kind.signingKeyRotated, actor: actor, reason: reason,
            detailJSON: String(decoding: detail.finish(), as: UTF8.self))
        guard try await store.insertKey(key.stored, previousRetireAfter: retiresAt, audit: event, ifNewestBefore: cutoff) else { return nil }
        logger.info("new signing key \(key.kid) (\(key.algorithm)), signing from \(activatesAt)\(reason.isEmpty ? "" : " (\(reason))")")
        try await loadKeys()
        return RotateKeysResponse(
            kid: key.kid, previousKid: previous, previousRetiresAt: retiresAt, activatesAt: activatesAt,
            publishedKids: keys.published(at: clock.now).map(\.kid))
    }
}
