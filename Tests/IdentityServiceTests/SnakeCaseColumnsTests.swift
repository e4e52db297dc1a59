import Foundation
import GatehouseContracts
import GatehouseSupport
import GatehouseTestSupport
import GRDB
import IdentityCore
import IdentityPorts
import Mail
import PostgresStores
import PostgresSupport
@testable import SQLiteStores
import SQLiteSupport
import Testing

/// One naming scheme for both stores: the identity database's columns have PostgreSQL's names
/// since migration 0015, which renames them in place in a database of migrations 0001–0014.
@Suite("Identity: SQLite columns named as PostgreSQL's (migration 0015)")
struct SnakeCaseColumnsTests {
    /// The PostgreSQL columns SQLite has no counterpart of, each for a reason.
    static let postgresOnlyColumns: [String: Set<String>] = [
        // Which instance's outbox worker claimed a row, until when: several instances share PostgreSQL.
        "outbox": ["claimed_by", "claimed_until"],
    ]

    /// Every table of `db` (SQLite's identity schema) and its columns.
    func sqliteColumns(_ db: any DatabaseReader) throws -> [String: [String]] {
        try db.read { try SchemaColumns.sqlite($0) }
    }

    @Test("no column of the identity database has an uppercase letter; each table has the PostgreSQL table's columns (from its migrations' DDL), but PostgreSQL's listed extras")
    func columnsArePostgresNames() throws {
        let dir = try TemporaryDirectory(prefix: "identity-columns")
        defer { dir.remove() }
        let queue = try DatabaseQueue(path: dir.databasePath)
        try SQLiteUserStore.migrator.migrate(queue)
        let sqlite = try sqliteColumns(queue)
        let postgres = SchemaColumns.postgres(PostgresUserStore.migrator.migrations.flatMap(\.statements))
        #expect(sqlite.count >= 12 && (sqlite["users"]?.count ?? 0) >= 18, "\(sqlite)")
        let problems = SchemaColumns.mismatches(
            sqlite: sqlite, postgres: postgres, postgresOnly: Self.postgresOnlyColumns, renames: SQLiteUserStore.snakeCaseRenames0015)
        for problem in problems { Issue.record(Comment(rawValue: problem)) }
        try expectNoOldNames(queue)
    }

    /// No index, trigger or view of `db` names a column by its old name outside a string
    /// literal; the literals that spell one are only the change log's JSON keys; the change-log
    /// trigger is what `changeLogUserJSON` and `changeLogKindConditions` say.
    func expectNoOldNames(_ db: any DatabaseReader, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let old = Set(SQLiteUserStore.snakeCaseRenames0015.flatMap { $0.columns.map(\.old) })
        let jsonKeys = Set(SchemaColumns.splitLiterals(SQLiteUserStore.changeLogUserJSON("NEW")).literals)
        #expect(jsonKeys.contains("emailNormalized") && jsonKeys.contains("createdAt"), sourceLocation: sourceLocation)
        let dependents = try db.read { try SchemaColumns.sqliteDependents($0) }
        #expect(dependents.count >= 15, "\(dependents.keys.sorted())", sourceLocation: sourceLocation)
        for (name, sql) in dependents {
            let (code, literals) = SchemaColumns.splitLiterals(sql)
            let named = Set(SchemaColumns.words(code)).intersection(old)
            #expect(named.isEmpty, "\(name) names \(named.sorted()): \(sql)", sourceLocation: sourceLocation)
            for literal in literals where !old.isDisjoint(with: SchemaColumns.words(literal)) {
                #expect(name == "users_change_log_update" && jsonKeys.contains(literal), "\(name): '\(literal)'", sourceLocation: sourceLocation)
            }
        }
        let trigger = try #require(dependents["users_change_log_update"], sourceLocation: sourceLocation)
        #expect(trigger.contains(SQLiteUserStore.changeLogUserJSON("NEW")), "\(trigger)", sourceLocation: sourceLocation)
        for (kind, condition) in SQLiteUserStore.changeLogKindConditions {
            #expect(trigger.contains("CASE WHEN \(condition) THEN '\(kind),'"), "\(kind)", sourceLocation: sourceLocation)
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

    @Test("a database of migrations 0001–0014 with rows in every table migrates in place: the same rows, read back through the store; its indexes and triggers work after")
    func migratesInPlace() async throws {
        let dir = try TemporaryDirectory(prefix: "identity-columns")
        defer { dir.remove() }
        @Sendable func ms(_ date: Date) -> Int64 { date.millisecondsSince1970 }
        @Sendable func hash(_ byte: UInt8) -> Data { Data(repeating: byte, count: 32) }
        let future = t0.addingTimeInterval(86_400)

        var adaRecord = UserRecord(
            id: .random(), email: try EmailAddress("Ada@Example.com"), emailVerified: true, displayName: "Ada",
            photoURL: "https://example.com/ada.png", passwordHash: "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaA",
            customClaimsJSON: #"{"role":"admin"}"#, settingsJSON: #"{"lang":"en"}"#, createdAt: t0, lastSignInAt: t0.addingTimeInterval(10),
            tokensValidAfter: t0.addingTimeInterval(5))
        adaRecord.linkedProviders = ["google.com"]
        let ada = adaRecord
        let anonymous = UserRecord(id: .random(), email: nil, isAnonymous: true, createdAt: t0, lastSignInAt: t0.addingTimeInterval(1))
        var appleRecord = UserRecord(id: .random(), email: nil, createdAt: t0)
        appleRecord.linkedProviders = ["apple.com"]
        let apple = appleRecord
        let mail = MailMessage(
            kind: "password_reset", from: "auth@example.com", to: "ada@example.com", subject: "Reset", text: "code-1", date: t0, expiresAt: future)
        let detail = #"{"keyId":"k1"}"#

        // The schema as migrations 0001–0014 leave it, filled the way that code wrote it.
        do {
            let queue = try DatabaseQueue(path: dir.databasePath)
            try SQLiteUserStore.migrator.migrate(queue, upTo: "0014-apple-tokens")
            try await queue.write { db in
                for user in [ada, anonymous, apple] { try db.execute(sql: legacyInsertUserSQL, arguments: SQLiteUserStore.arguments(user)) }
                try db.execute(
                    sql: "INSERT INTO identities (provider, subject, userId, createdAt) VALUES ('google.com', 'g-1', ?, ?), ('apple.com', 'a-1', ?, ?)",
                    arguments: [ada.id.rawValue, ms(t0), apple.id.rawValue, ms(t0)])
                try db.execute(sql: "UPDATE users SET sessionActivityAt = ? WHERE id = ?", arguments: [ms(t0) + 2000, anonymous.id.rawValue])
                try db.execute(
                    sql: "INSERT INTO outbox (messageId, kind, recipient, message, nextAttemptAt, createdAt) VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: [mail.messageID, mail.kind, mail.to, String(decoding: try JSONEncoder().encode(mail), as: UTF8.self), ms(t0), ms(t0)])
                try db.execute(
                    sql: "INSERT INTO password_resets (userId, codeHash, expiresAt, createdAt) VALUES (?, ?, ?, ?)",
                    arguments: [ada.id.rawValue, hash(1), ms(future), ms(t0)])
                try db.execute(
                    sql: """
                        INSERT INTO email_actions (purpose, userId, codeHash, email, emailNormalized, fromEmailNormalized, previousVerified, expiresAt, createdAt)
                        VALUES ('change_email', ?1, ?2, 'Ada.New@Example.com', 'ada.new@example.com', 'ada@example.com', 0, ?4, ?5),
                            ('revert_email', ?1, ?3, 'Old@Example.com', 'old@example.com', 'ada@example.com', 1, ?4, ?5)
                        """,
                    arguments: [ada.id.rawValue, hash(2), hash(3), ms(future), ms(t0)])
                // A change the old trigger writes.
                try db.execute(
                    sql: "UPDATE users SET displayName = 'Ada L.', updatedAt = ?, version = version + 1 WHERE id = ?",
                    arguments: [ms(t0) + 20_000, ada.id.rawValue])
                try db.execute(sql: "UPDATE change_log_state SET capCheckedThrough = 1")
                try db.execute(sql: "INSERT INTO user_changes_pruned (userId, prunedThrough) VALUES (?, 1)", arguments: [anonymous.id.rawValue])
                try db.execute(
                    sql: """
                        INSERT INTO audit_log (occurredAt, kind, userId, actor, reason, email, ip, userAgent, sessionId, detail)
                        VALUES (?, 'admin_key.revoked', ?, 'operator', 'why', 'ada@example.com', '192.0.2.1', 'UA/1', 'sid-1', ?)
                        """,
                    arguments: [ms(t0), ada.id.rawValue, detail])
                try db.execute(
                    sql: "INSERT INTO admin_keys (id, name, scopes, secretHash, createdAt, lastUsedAt) VALUES ('k123456789abcdef', 'ops', 'users:read', ?, ?, ?)",
                    arguments: [hash(4), ms(t0), ms(t0) + 1])
                try db.execute(
                    sql: "INSERT INTO apple_tokens (userId, subject, clientId, sealedToken, createdAt) VALUES (?, 'a-1', 'com.example.app', ?, ?)",
                    arguments: [apple.id.rawValue, Data([5, 6, 7]), ms(t0)])
                try db.execute(
                    sql: """
                        INSERT INTO apple_revocations (clientId, sealedToken, associatedData, attempts, nextAttemptAt, createdAt)
                        VALUES ('com.example.app', ?, 'gone-user a-0', 2, ?, ?)
                        """,
                    arguments: [Data([8, 9]), ms(t0), ms(t0)])
            }
            try queue.close()
        }
        let before = try rows(DatabaseQueue(path: dir.databasePath))
        #expect(before.values.allSatisfy { !$0.isEmpty }, "a table was left empty: \(before.filter { $0.value.isEmpty }.keys.sorted())")

        let store = try await dir.migratedStore()
        #expect(try await store.appliedMigrations().last == "0015-snake-case-columns")
        // Every row as it was, column for column.
        #expect(try rows(store.files.pool) == before)
        try expectNoOldNames(store.files.pool)

        // Read back through the store.
        var expectedAda = ada
        expectedAda.displayName = "Ada L."
        expectedAda.version = 2
        expectedAda.updatedAt = t0.addingTimeInterval(20)
        #expect(try await store.user(id: ada.id) == expectedAda)
        #expect(try await store.user(normalizedEmail: "ada@example.com") == expectedAda)
        #expect(try await store.user(id: anonymous.id) == anonymous)
        #expect(try await store.userID(provider: "apple.com", subject: "a-1") == apple.id)
        #expect(try await store.subjects(provider: "google.com", of: ada.id) == ["g-1"])
        var filter = UserFilter()
        filter.provider = "google.com"
        #expect(try await store.users(filter: filter, after: "", limit: 10).0.map(\.id) == [ada.id])
        #expect(try await store.users(after: "", limit: 10).count == 3)
        #expect(try await store.anonymousCandidates(inactiveBefore: future, limit: 10) == [
            AnonymousCandidate(id: anonymous.id, lastActivity: t0.addingTimeInterval(2)),
        ])
        #expect(try await store.outboxEntries() == [
            OutboxEntry(id: 1, message: mail, state: "queued", attempts: 0, nextAttemptAt: t0, createdAt: t0, sentAt: nil, lastError: nil),
        ])
        let reset = try await store.passwordResetUser(codeHash: hash(1), now: t0)
        #expect(reset?.0 == ada.id && reset?.1 == "ada@example.com")
        #expect(try await store.emailChangeCode(codeHash: hash(2), purpose: .changeEmail, now: t0) == EmailChangeCode(
            userID: ada.id, email: "Ada.New@Example.com", emailNormalized: "ada.new@example.com", fromEmailNormalized: "ada@example.com",
            previousVerified: false))
        let log = try await store.listChanges(afterSeq: 0, limit: 10)
        #expect(log.head == 1 && log.changes.map(\.kinds) == [["profile"]] && log.changes.first?.user?.displayName == "Ada L.")
        #expect(log.changes.first?.occurredAt == t0.addingTimeInterval(20) && log.resyncUserIDs == [anonymous.id.rawValue])
        #expect(try await store.auditEvents(ListAuditRequest()).events == [
            AuditEvent(
                seq: 1, occurredAt: t0, kind: "admin_key.revoked", userID: ada.id.rawValue, actor: "operator", reason: "why",
                email: "ada@example.com", ip: "192.0.2.1", userAgent: "UA/1", sessionID: "sid-1", detailJSON: detail),
        ])
        #expect(try await store.adminKeys().map(\.lastUsedAt) == [Date(millisecondsSince1970: ms(t0) + 1)])
        #expect(try await store.activeAdminKey(id: "k123456789abcdef")?.1 == hash(4))
        #expect(try await store.dueAppleRevocations(now: t0, limit: 10) == [
            PendingAppleRevocation(id: 1, clientID: "com.example.app", sealedToken: Data([8, 9]), associatedData: "gone-user a-0", attempts: 2),
        ])

        // The triggers and indexes, rewritten by the renames, still do their work.
        _ = try await store.update(id: ada.id, expectedVersion: 2, now: t0.addingTimeInterval(30)) { $0.displayName = "Ada M." }
        #expect(try await store.changes(after: 1, limit: 10).map(\.user?.displayName) == ["Ada M."])
        await #expect(throws: IdentityError.emailExists) { try await store.insert(try makeUser("old@example.com")) }  // reserved
        await #expect(throws: IdentityError.emailExists) { try await store.insert(try makeUser("ADA@example.com")) }  // unique
        try await store.delete(id: apple.id)
        #expect(try await store.appleTokenCount() == 0)
        // Queued by the trigger, due at the wall clock's now.
        let later = Date().addingTimeInterval(3600)
        #expect(try await store.dueAppleRevocations(now: later, limit: 10).map(\.associatedData) == ["gone-user a-0", "\(apple.id.rawValue) a-1"])
        #expect(try await store.changes(after: 2, limit: 10).map(\.kinds) == [["deleted"]])
        #expect(try await store.deleteAnonymous(id: anonymous.id, inactiveBefore: future))
        #expect(try await store.purgeCodes(before: future.addingTimeInterval(1)) == 3)
        // The two updates' changes (the deletions' happened at the wall clock's now).
        #expect(try await store.pruneChanges(before: future, maxPerUser: 10, batch: 10) == 2)
        #expect(try await store.pruneAudit(before: future, batch: 10) == 1)
    }
}
