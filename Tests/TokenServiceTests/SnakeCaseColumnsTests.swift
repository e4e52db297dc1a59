import Foundation
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import GRDB
import PostgresStores
import PostgresSupport
@testable import SQLiteStores
import SQLiteSupport
import Testing
import TokenCore
import TokenPorts

/// One naming scheme for both stores: the token database's columns have PostgreSQL's names since
/// migration 0006, which renames them in place in a database of migrations 0001–0005.
@Suite("Token: SQLite columns named as PostgreSQL's (migration 0006)")
struct SnakeCaseColumnsTests {
    /// SQLite's tables and the PostgreSQL tables of the same rows (prefixed `token_`: the token
    /// store shares its PostgreSQL database with the identity store).
    static let postgresTables = [
        "meta": "token_meta", "signingKey": "token_signing_key", "session": "token_session", "refreshToken": "token_refresh_token",
        "audit_log": "token_audit_log",
    ]

    /// The PostgreSQL columns SQLite has no counterpart of, each for a reason.
    static let postgresOnlyColumns: [String: Set<String>] = [
        // The insertion order SQLite's rowid gives (tie-breaks, the sweep's ranges).
        "token_signing_key": ["ord"], "token_session": ["ord"],
    ]

    @Test("no column of the token database has an uppercase letter; each table has its PostgreSQL table's columns (from its migrations' DDL), but PostgreSQL's listed extras; no index names an old column")
    func columnsArePostgresNames() throws {
        let dir = try TemporaryDirectory(prefix: "token-columns")
        defer { dir.remove() }
        let queue = try DatabaseQueue(path: dir.path("token.sqlite"))
        try SQLiteTokenStore.migrator.migrate(queue)
        let sqlite = try queue.read { try SchemaColumns.sqlite($0) }
        let postgres = SchemaColumns.postgres(PostgresTokenStore.migrator.migrations.flatMap(\.statements))
        #expect(Set(sqlite.keys) == Set(Self.postgresTables.keys))
        let problems = SchemaColumns.mismatches(
            sqlite: sqlite, postgres: postgres, postgresName: { Self.postgresTables[$0] }, postgresOnly: Self.postgresOnlyColumns,
            renames: SQLiteTokenStore.snakeCaseRenames0006)
        for problem in problems { Issue.record(Comment(rawValue: problem)) }
        try expectNoOldNames(queue)
    }

    /// No index, trigger or view of `db` names a column by its old name, in code or literal.
    func expectNoOldNames(_ db: any DatabaseReader, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let old = Set(SQLiteTokenStore.snakeCaseRenames0006.flatMap { $0.columns.map(\.old) })
        let dependents = try db.read { try SchemaColumns.sqliteDependents($0) }
        #expect(dependents.count >= 5, "\(dependents.keys.sorted())", sourceLocation: sourceLocation)
        for (name, sql) in dependents {
            let named = Set(SchemaColumns.words(sql)).intersection(old)
            #expect(named.isEmpty, "\(name) names \(named.sorted()): \(sql)", sourceLocation: sourceLocation)
        }
    }

    /// Every row of every table of `db`, as stored (values in column order), sorted.
    func rows(_ db: any DatabaseReader) throws -> [String: [[DatabaseValue]]] {
        try db.read { db in
            var rows: [String: [[DatabaseValue]]] = [:]
            for table in try SchemaColumns.sqlite(db).keys {
                rows[table] = try Row.fetchAll(db, sql: "SELECT * FROM \(table)").map { Array($0.databaseValues) }
                    .sorted { "\($0)" < "\($1)" }
            }
            return rows
        }
    }

    @Test("a database of migrations 0001–0005 with rows in every table migrates in place: the same rows, read back through the store and the copy source; the key rotation refuses it before")
    func migratesInPlace() async throws {
        let dir = try TemporaryDirectory(prefix: "token-columns")
        defer { dir.remove() }
        let path = dir.path("token.sqlite")
        let t = Date(timeIntervalSince1970: 1_750_000_000)
        @Sendable func ms(_ date: Date) -> Int64 { date.millisecondsSince1970 }
        @Sendable func hash(_ byte: UInt8) -> Data { Data(repeating: byte, count: 32) }
        let secret = Data(repeating: 7, count: 32)

        // The schema as migrations 0001–0005 leave it, filled the way that code wrote it.
        do {
            let queue = try DatabaseQueue(path: path)
            try SQLiteTokenStore.migrator.migrate(queue, upTo: "0005-key-activation")
            try await queue.write { db in
                try db.execute(sql: "INSERT INTO meta (name, value) VALUES (?, ?)", arguments: [TokenSecrets.successorName, secret])
                try db.execute(
                    sql: """
                        INSERT INTO signingKey (kid, algorithm, privateKey, encrypted, createdAt, signingUntil, retireAfter, activatesAt)
                        VALUES ('k-1', 'ES256', ?, 1, ?, ?, ?, NULL), ('k-2', 'EdDSA', ?, 0, ?, NULL, NULL, ?)
                        """,
                    arguments: [Data([1, 2, 3]), ms(t - 1000), ms(t), ms(t + 1000), Data([4, 5]), ms(t), ms(t)])
                try db.execute(
                    sql: """
                        INSERT INTO session (id, userId, createdAt, authTime, amr, userAgent, ip, lastUsedAt, expiresAt, revokedAt, revokeReason,
                            currentHash, rotatedAt)
                        VALUES ('s-1', 'user-1', ?1, ?1, 'pwd otp', 'UA/1', '192.0.2.1', ?2, ?3, NULL, '', ?5, ?2),
                            ('s-2', 'user-2', ?1, ?1, 'pwd', 'UA/2', '192.0.2.2', ?1, ?3, ?4, 'sign_out', ?6, NULL)
                        """,
                    arguments: [ms(t), ms(t + 10), ms(t + 86_400), ms(t + 20), hash(1), hash(2)])
                try db.execute(
                    sql: "INSERT INTO refreshToken (hash, sessionId, createdAt) VALUES (?, 's-1', ?), (?, 's-1', ?), (?, 's-2', ?)",
                    arguments: [hash(0), ms(t), hash(1), ms(t + 10), hash(2), ms(t)])
                try db.execute(
                    sql: """
                        INSERT INTO audit_log (occurredAt, kind, userId, actor, reason, email, ip, userAgent, sessionId, detail)
                        VALUES (?, 'session.revoked', 'user-2', 'user', 'sign_out', '', '192.0.2.2', 'UA/2', 's-2', '')
                        """,
                    arguments: [ms(t + 20)])
            }
            try queue.close()
        }
        let before = try rows(DatabaseQueue(path: path))
        #expect(before.values.allSatisfy { !$0.isEmpty })
        // The key rotation reads the new names: it refuses a file this version has not migrated, changing nothing.
        let refusal = #expect(throws: SQLiteTokenStore.RewrapError.self) {
            try SQLiteTokenStore.rewrap(path: path, discardUnreadable: false, open: { sealed, _ in sealed }, seal: { $0 })
        }
        #expect(refusal?.description.contains("0006-snake-case-columns") == true, "\(String(describing: refusal))")

        let store = try SQLiteTokenStore(path: path)
        try store.migrate()
        #expect(try rows(store.pool) == before)
        try expectNoOldNames(store.pool)

        // Read back through the store.
        func describe(_ key: StoredSigningKey) -> String {
            let times = [key.createdAt, key.activatesAt, key.signingUntil, key.retireAfter].map { $0.map { "\(ms($0))" } ?? "nil" }
            return "\(key.kid) \(key.algorithm) \(key.privateKey.base64EncodedString()) \(key.encrypted) \(times)"
        }
        #expect(try await store.keys().map(describe) == [
            StoredSigningKey(
                kid: "k-1", algorithm: "ES256", privateKey: Data([1, 2, 3]), encrypted: true, createdAt: t - 1000, signingUntil: t,
                retireAfter: t + 1000),
            StoredSigningKey(kid: "k-2", algorithm: "EdDSA", privateKey: Data([4, 5]), encrypted: false, createdAt: t, activatesAt: t),
        ].map(describe))
        #expect(try await store.secret(named: TokenSecrets.successorName, make: { Data() }) == secret)
        let one = StoredSession(
            id: "s-1", userID: "user-1", createdAt: t, authTime: t, amr: ["pwd", "otp"], client: ClientInfo(userAgent: "UA/1", ip: "192.0.2.1"),
            lastUsedAt: t + 10, expiresAt: t + 86_400, revokedAt: nil, revokeReason: "")
        let two = StoredSession(
            id: "s-2", userID: "user-2", createdAt: t, authTime: t, amr: ["pwd"], client: ClientInfo(userAgent: "UA/2", ip: "192.0.2.2"),
            lastUsedAt: t, expiresAt: t + 86_400, revokedAt: t + 20, revokeReason: "sign_out")
        #expect(try store.session(forRefreshHash: hash(0)) == one)
        #expect(try await store.session(id: "s-2") == two)
        #expect(try await store.sessions(userID: "user-1") == [one])
        #expect(try await store.currentHash(sessionID: "s-1") == hash(1))
        #expect(try await store.isRevoked(sessionID: "s-2"))
        #expect(try await !store.isRevoked(sessionID: "s-1"))
        #expect(try await store.revokedSessions(since: t).map(\.sessionID) == ["s-2"])
        #expect(try await store.revokedSessionIDs(userID: "user-2", since: t) == ["s-2"])
        #expect(try await store.lastActivity(userIDs: ["user-1", "user-2", "user-3"]) == ["user-1": t + 10, "user-2": t])
        #expect(try await store.auditEvents(ListAuditRequest()).events == [
            AuditEvent(
                seq: 1, occurredAt: t + 20, kind: "session.revoked", userID: "user-2", actor: "user", reason: "sign_out", ip: "192.0.2.2",
                userAgent: "UA/2", sessionID: "s-2"),
        ])
        let rowCounts = try await store.rowCounts()
        #expect(rowCounts.sessions == 2 && rowCounts.refreshTokens == 3)

        // And through the copy source `gatehouse store copy` reads.
        let source = try SQLiteTokenStore.CopySource(path: path)
        #expect(try source.counts() == TokenCopyCounts(keys: 2, sessions: 2, refreshTokens: 3, auditEvents: 1, secrets: 1))
        let copied = try source.sessions(after: 0, limit: 10).rows
        #expect(copied.map(\.row) == [one, two] && copied.map(\.currentHash) == [hash(1), hash(2)] && copied.map(\.rotatedAt) == [t + 10, nil])
        #expect(try source.refreshTokens(after: nil, limit: 10).map(\.sessionID) == ["s-1", "s-1", "s-2"])
        #expect(try source.auditRows(after: 0, limit: 10).map(\.text) == [["session.revoked", "user-2", "user", "sign_out", "", "192.0.2.2", "UA/2", "s-2", ""]])
        #expect(try source.keys().map(\.kid) == ["k-1", "k-2"])

        // Rotation, reuse detection and the sweep work on the renamed columns.
        let rotated = try await store.rotate(hash: hash(1), successorHash: hash(3), now: t + 60, grace: 10, idleTimeout: 86_400)
        var afterRotation = one
        afterRotation.lastUsedAt = t + 60
        #expect(rotated == .rotated(afterRotation))
        let reused = try await store.rotate(hash: hash(0), successorHash: hash(9), now: t + 61, grace: 10, idleTimeout: 86_400)
        guard case .reused(let revoked) = reused else {
            Issue.record("expected reuse, got \(reused)")
            return
        }
        #expect(revoked.revokedAt == t + 61 && revoked.revokeReason == RefreshRotation.reuseReason)
        #expect(try await store.sweep(now: t + 10 * 86_400, retention: 86_400, idleTimeout: 86_400) == SweepCounts(sessions: 2, refreshTokens: 4))
    }
}
