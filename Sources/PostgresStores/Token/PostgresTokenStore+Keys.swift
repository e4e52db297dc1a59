import Foundation
import TokenPorts
import GatehouseContracts
import GatehouseSupport
import PostgresNIO
import Synchronization

extension PostgresTokenStore {
    // MARK: Secrets

    /// A stored secret, created with `make` on first use. Instances racing on an empty store
    /// agree: the first insert wins (`ON CONFLICT DO NOTHING`) and the others read its value.
    /// One round trip once the secret exists.
    public func secret(named name: String, make: @escaping @Sendable () -> Data) async throws -> Data {
        if let stored = try await meta(name) { return stored }
        return try await insertMeta(name, make())
    }

    /// The `token_meta` value `name`, or nil.
    func meta(_ name: String) async throws -> Data? {
        try await run { [self] connection in
            try await rows("SELECT value FROM token_meta WHERE name = \(name)", on: connection).first?.decode(Data.self)
        }
    }

    /// Stores `value` as `name` unless a value is stored already; the stored value.
    func insertMeta(_ name: String, _ value: Data) async throws -> Data {
        let inserted = try await run { [self] connection in
            try await rows(
                "INSERT INTO token_meta (name, value) VALUES (\(name), \(value)) ON CONFLICT (name) DO NOTHING RETURNING value",
                on: connection
            ).first?.decode(Data.self)
        }
        if let inserted { return inserted }
        // Another instance stored one first (committed before the conflict was reported): read
        // it in a statement of its own, whose snapshot sees that commit.
        guard let stored = try await meta(name) else {
            logger.error("token store: meta value \(name) neither inserted nor found")
            throw RPCError(.internal, "internal error")
        }
        return stored
    }

    /// Replaces the stored secret `name` with `value` (an UPDATE). PostgreSQL keeps the old row
    /// version as a dead tuple until VACUUM reclaims it (see `scrubFreedPages`).
    public func replaceSecret(named name: String, with value: Data) async throws {
        try await run { [self] connection in
            try await rows("UPDATE token_meta SET value = \(value) WHERE name = \(name)", on: connection)
        }
    }

    /// Seals every signing key stored in plain text with `seal`, in one transaction; how many it
    /// sealed. The rows are locked as read, so instances starting together seal each key once.
    public func sealPlaintextKeys(_ seal: @escaping @Sendable (Data) throws -> Data) async throws -> Int {
        try await transaction { [self] connection in
            let plain = try await rows(
                "SELECT kid, private_key FROM token_signing_key WHERE NOT encrypted ORDER BY created_at, ord FOR UPDATE", on: connection
            ).map { try $0.decode((String, Data).self) }
            for (kid, key) in plain {
                let sealed = try seal(key)
                try await rows(
                    "UPDATE token_signing_key SET private_key = \(sealed), encrypted = true WHERE kid = \(kid)", on: connection)
            }
            return plain.count
        }
    }

    /// Nothing to do, and nothing the process could do: SQLite's store truncates its WAL so the
    /// old bytes of a replaced secret leave the files it owns, but PostgreSQL keeps an updated
    /// row's old version as a dead tuple in the server's own files until VACUUM reclaims the
    /// space (and its WAL segments until they are recycled), which no client statement can force
    /// to overwrite. Operators who need that run `VACUUM` on `token_meta` and
    /// `token_signing_key` after sealing, and keep the server's disks encrypted.
    public func scrubFreedPages() async throws {}

    // MARK: Keys

    /// The advisory lock that serialises key writes (a transaction's: released at its end).
    static let keysLock = lockKey("gatehouse.token-store.signing-keys")

    /// Every stored key, oldest first (insertion order between keys made at one instant).
    public func keys() async throws -> [StoredSigningKey] {
        try await run { [self] connection in
            try await rows(
                """
                SELECT kid, algorithm, private_key, encrypted, created_at, activates_at, signing_until, retire_after
                FROM token_signing_key ORDER BY created_at, ord
                """, on: connection
            ).map { row in
                let (kid, algorithm, privateKey, encrypted, created, activates, until, retire) = try row.decode(
                    (String, String, Data, Bool, Int64, Int64, Int64?, Int64?).self)
                return StoredSigningKey(
                    kid: kid, algorithm: algorithm, privateKey: privateKey, encrypted: encrypted,
                    createdAt: Date(millisecondsSince1970: created), activatesAt: Date(millisecondsSince1970: activates),
                    signingUntil: until.map(Date.init(millisecondsSince1970:)), retireAfter: retire.map(Date.init(millisecondsSince1970:)))
            }
        }
    }

    /// Adds `key`, to sign from `key.activatesAt`; the key signing until then (`signing_until`
    /// unset) stops at that instant and stays published until `previousRetireAfter`. Key
    /// writes are serialised by a transaction-scoped advisory lock, so of two rotations at once
    /// the second closes the first's key, as SQLite's one writer would. `audit` is appended in
    /// the same transaction. With `ifNewestBefore` the newest key's creation time is compared
    /// under the lock: of instances whose schedules fall due together, the first rotates and the
    /// others find its key. Whether it added the key.
    @discardableResult
    public func insertKey(
        _ key: StoredSigningKey, previousRetireAfter: Date, audit: AuditEvent?, ifNewestBefore cutoff: Date?
    ) async throws -> Bool {
        try await transaction { [self] connection in
            try await rows("SELECT pg_advisory_xact_lock(\(Self.keysLock))", on: connection)
            // Statements after the lock: their snapshots see every key committed before it.
            if let cutoff {
                let newest = try await rows("SELECT max(created_at) FROM token_signing_key", on: connection).first?.decode(Int64?.self)
                if let newest, newest >= Self.ms(cutoff) { return false }
            }
            try await rows(
                """
                WITH previous AS (
                    UPDATE token_signing_key SET signing_until = \(Self.ms(key.activatesAt)), retire_after = \(Self.ms(previousRetireAfter))
                    WHERE signing_until IS NULL
                )
                INSERT INTO token_signing_key (kid, algorithm, private_key, encrypted, created_at, activates_at)
                VALUES (\(key.kid), \(key.algorithm), \(key.privateKey), \(key.encrypted), \(Self.ms(key.createdAt)), \(Self.ms(key.activatesAt)))
                """, on: connection)
            if let e = audit {
                // The audit position drawn from the counter row, as a revocation's is.
                try await rows(
                    """
                    WITH counter AS (UPDATE token_revocation_counter SET audit_seq = audit_seq + 1 RETURNING audit_seq)
                    INSERT INTO token_audit_log (seq, occurred_at, kind, user_id, actor, reason, email, ip, user_agent, session_id, detail)
                    SELECT c.audit_seq, \(Self.ms(e.occurredAt)), \(e.kind), \(e.userID), \(e.actor), \(e.reason), \(e.email), \(e.ip),
                        \(e.userAgent), \(e.sessionID), \(e.detailJSON)
                    FROM counter c
                    """, on: connection)
            }
            return true
        }
    }

    /// Adds `key` unless a key exists; whether it did. Instances starting together on an empty
    /// database take the keys lock in turn: the first inserts, the others find its key.
    public func insertFirstKey(_ key: StoredSigningKey) async throws -> Bool {
        try await transaction { [self] connection in
            try await rows("SELECT pg_advisory_xact_lock(\(Self.keysLock))", on: connection)
            // A statement after the lock: its snapshot sees a key committed by the lock's holder.
            return try await !rows(
                """
                INSERT INTO token_signing_key (kid, algorithm, private_key, encrypted, created_at, activates_at)
                SELECT \(key.kid), \(key.algorithm), \(key.privateKey), \(key.encrypted), \(Self.ms(key.createdAt)), \(Self.ms(key.activatesAt))
                WHERE NOT EXISTS (SELECT 1 FROM token_signing_key)
                RETURNING kid
                """, on: connection
            ).isEmpty
        }
    }

    // MARK: Revocation epoch

    /// The name of the revocation feed's epoch in `token_meta`.
    static let epochName = "revocation-epoch"

    /// The feed's epoch: 16 random bytes in base64url, drawn once for the database (the first
    /// instance to store one wins a race) and the same for every instance.
    public func revocationEpoch() async throws -> String {
        if let known = epoch.withLock({ $0 }) { return known }
        let stored: Data
        if let existing = try await meta(Self.epochName) {
            stored = existing
        } else {
            var random = SystemRandomNumberGenerator()
            let bytes = withUnsafeBytes(of: (random.next() as UInt64, random.next() as UInt64)) { Array($0) }
            stored = try await insertMeta(Self.epochName, Data(Base64URL.encode(bytes).utf8))
        }
        let value = String(decoding: stored, as: UTF8.self)
        epoch.withLock { $0 = value }
        return value
    }
}
