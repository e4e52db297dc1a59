import Foundation
import TokenPorts
import GatehouseContracts
import PostgresNIO

/// `gatehouse store copy`: a `token.sqlite` moved into an empty PostgreSQL token store, in one
/// transaction (all of it or nothing), everything kept as stored: sealed keys and secret stay
/// sealed (the instances need the same key-encryption key), sessions keep their current tokens,
/// so every user stays signed in, and the audit log keeps its positions.
extension PostgresTokenStore {
    /// Copies everything `source` holds into this store, which must be empty (migrated, no key,
    /// no session, no secret), then checks the copy before committing it: the counts of every kind
    /// of row, and `sample` refresh tokens picked at random finding the same session; and
    /// `sourceUnchanged` (nothing opened the source meanwhile). Throws `TokenCopyError`
    /// when any of it fails, changing nothing. Returns the counts and how many tokens were checked.
    public func copy(
        from source: any TokenCopySource, batch: Int = 500, sample: Int = 100, sourceUnchanged: @escaping @Sendable () -> Bool
    ) async throws -> (counts: TokenCopyCounts, sampled: Int) {
        try await transaction { [self] connection in
            // A large copy is one long transaction: no per-session limit cuts it.
            try await rows("SET LOCAL statement_timeout = 0", on: connection)
            try await rows("SET LOCAL idle_in_transaction_session_timeout = 0", on: connection)
            // Taken first, so two copies (or an instance starting) cannot interleave with this one.
            try await rows("LOCK TABLE token_meta, token_signing_key, token_session IN EXCLUSIVE MODE", on: connection)
            let present = try await rows(
                "SELECT (SELECT count(*) FROM token_signing_key) + (SELECT count(*) FROM token_session) + (SELECT count(*) FROM token_meta)",
                on: connection
            ).first?.decode(Int64.self) ?? 0
            guard present == 0 else {
                throw TokenCopyError("the target database already holds a token store (keys, sessions or a secret): copy into an empty database")
            }
            for secret in try source.secrets() {
                try await rows("INSERT INTO token_meta (name, value) VALUES (\(secret.name), \(secret.value))", on: connection)
            }
            for key in try source.keys() {
                try await insert(
                    "token_signing_key", ["kid", "algorithm", "private_key", "encrypted", "created_at", "activates_at", "signing_until", "retire_after"],
                    [[.text(key.kid), .text(key.algorithm), .bytes(key.privateKey), .bool(key.encrypted), .int(Self.ms(key.createdAt)),
                      .int(Self.ms(key.activatesAt)), .int(key.signingUntil.map(Self.ms)), .int(key.retireAfter.map(Self.ms))]],
                    on: connection)
            }
            var after: Int64 = 0
            while true {
                let (sessions, last) = try source.sessions(after: after, limit: batch)
                if sessions.isEmpty { break }
                try await insert(
                    "token_session",
                    ["id", "user_id", "created_at", "auth_time", "amr", "user_agent", "ip", "last_used_at", "expires_at", "revoked_at",
                     "revoke_reason", "current_hash", "rotated_at"],
                    sessions.map { s in
                        let r = s.row
                        return [
                            .text(r.id), .text(r.userID), .int(Self.ms(r.createdAt)), .int(Self.ms(r.authTime)), .text(r.amr.joined(separator: " ")),
                            .text(r.client.userAgent), .text(r.client.ip), .int(Self.ms(r.lastUsedAt)), .int(Self.ms(r.expiresAt)),
                            .int(r.revokedAt.map(Self.ms)), .text(r.revokeReason), .bytes(s.currentHash), .int(s.rotatedAt.map(Self.ms)),
                        ]
                    }, on: connection)
                after = last
            }
            var hash: Data?
            while true {
                let tokens = try source.refreshTokens(after: hash, limit: batch)
                guard let lastToken = tokens.last else { break }
                try await insert(
                    "token_refresh_token", ["hash", "session_id", "created_at"],
                    tokens.map { [.bytes($0.hash), .text($0.sessionID), .int(Self.ms($0.createdAt))] }, on: connection)
                hash = lastToken.hash
            }
            var seq: Int64 = 0
            while true {
                let events = try source.auditRows(after: seq, limit: batch)
                guard let lastEvent = events.last else { break }
                try await insert(
                    "token_audit_log", ["seq", "occurred_at", "kind", "user_id", "actor", "reason", "email", "ip", "user_agent", "session_id", "detail"],
                    events.map { [.int($0.seq), .int($0.occurredAt)] + $0.text.map { .text($0) } }, on: connection)
                seq = lastEvent.seq
            }
            // The next audit event follows every position the source ever gave (pruned ones too).
            let highWater = max(seq, try source.auditHighWater())
            try await rows("UPDATE token_revocation_counter SET audit_seq = greatest(audit_seq, \(highWater))", on: connection)

            // Checked before the commit: a copy that does not match is rolled back.
            let expected = try source.counts()
            let copied = try await counts(on: connection)
            guard copied == expected else {
                throw TokenCopyError("the copy does not match (nothing was kept): \(expected) in SQLite, \(copied) in PostgreSQL")
            }
            let picked = try source.sample(sample)
            for (hash, sessionID) in picked {
                let found = try Self.first(await prepared(SessionByRefreshHash(hash: hash), on: connection))
                guard found?.id == sessionID else {
                    throw TokenCopyError("the copy does not match (nothing was kept): a refresh token of session \(sessionID) does not find it")
                }
            }
            guard sourceUnchanged() else {
                throw TokenCopyError("the source was opened by another process during the copy (nothing was kept): stop the token service and copy again")
            }
            return (copied, picked.count)
        }
    }

    /// The rows of each kind, read on `connection`.
    /// Whether this database already holds a token store (keys, sessions or a secret): a copy
    /// into it would be refused (checked by `gatehouse store copy` before it copies anything).
    public func holdsTokenStore() async throws -> Bool {
        try await run { [self] connection in
            try await rows(
                "SELECT (SELECT count(*) FROM token_signing_key) + (SELECT count(*) FROM token_session) + (SELECT count(*) FROM token_meta)",
                on: connection
            ).first?.decode(Int64.self) ?? 0 > 0
        }
    }

    func counts(on connection: PostgresConnection) async throws -> TokenCopyCounts {
        guard let row = try await rows(
            """
            SELECT (SELECT count(*) FROM token_signing_key), (SELECT count(*) FROM token_session),
                (SELECT count(*) FROM token_refresh_token), (SELECT count(*) FROM token_audit_log), (SELECT count(*) FROM token_meta)
            """, on: connection
        ).first else { return TokenCopyCounts() }
        let (keys, sessions, tokens, audit, secrets) = try row.decode((Int64, Int64, Int64, Int64, Int64).self)
        return TokenCopyCounts(
            keys: Int(keys), sessions: Int(sessions), refreshTokens: Int(tokens), auditEvents: Int(audit), secrets: Int(secrets))
    }

    /// A column value of a copied row.
    enum CopyValue {
        case text(String)
        case int(Int64?)
        case bytes(Data?)
        case bool(Bool)
    }

    /// One multi-row INSERT of `values` (rows of `columns`), every value a bind.
    func insert(_ table: String, _ columns: [String], _ values: [[CopyValue]], on connection: PostgresConnection) async throws {
        guard !values.isEmpty else { return }
        var bindings = PostgresBindings(capacity: values.count * columns.count)
        var tuples: [String] = []
        tuples.reserveCapacity(values.count)
        var n = 0
        for row in values {
            var placeholders: [String] = []
            for value in row {
                n += 1
                placeholders.append("$\(n)")
                switch value {
                // NUL (refused by PostgreSQL's text) may be in rows written before it was stripped.
                case .text(let text): bindings.append(text.contains("\u{0}") ? text.replacingOccurrences(of: "\u{0}", with: "") : text)
                case .int(let int?): bindings.append(int)
                case .bytes(let bytes?): try bindings.append(bytes)
                case .bool(let bool): bindings.append(bool)
                case .int(nil), .bytes(nil): bindings.appendNull()
                }
            }
            tuples.append("(" + placeholders.joined(separator: ", ") + ")")
        }
        // Table and column names are this file's constants; every value is a bind.
        let sql = "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES " + tuples.joined(separator: ", ")
        try await rows(PostgresQuery(unsafeSQL: sql, binds: bindings), on: connection)
    }
}
