import Foundation
import IdentityCore
import IdentityPorts
import PostgresNIO

// `gatehouse store copy` (issue 24 §1), the identity side: a stopped identity service's
// identity.sqlite copied into an empty PostgreSQL database in one transaction, every table as it
// is stored (users with their password hashes, provider links, pending codes and mail, the change
// log with its positions, the audit log, admin keys, Apple tokens), then checked by the counts of
// every table and a sample of sign-ins before the commit.
extension PostgresUserStore {
    /// What a copy wrote: rows per table, and how many sign-ins were checked.
    public struct CopyReport: Sendable, CustomStringConvertible {
        /// Rows copied, by PostgreSQL table.
        public var rows: [String: Int] = [:]
        /// Users whose sign-in (by email: the id and password hash found) was checked.
        public var sampled = 0
        /// "users 12, identities 3, …"
        public var description: String {
            rows.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
    }

    /// The SQLite tables not copied, each for a reason.
    static let copySkippedTables: Set<String> = []

    /// The order tables are copied in: users first (the others refer to them), then the rest by name.
    static func copyOrder(_ tables: [String]) -> [String] {
        let first = ["users", "identities"]
        return first.filter(tables.contains) + tables.filter { !first.contains($0) }.sorted()
    }

    /// Copies `source` into this (migrated, empty) database in one transaction; checks the counts
    /// of every table and `sample` sign-ins before committing (rolled back on any mismatch).
    /// `sourceUnchanged` is asked last: false rolls back (another process opened the source).
    public func copy(
        from source: any IdentityCopySource, batch: Int = 500, sample: Int = 100, sourceUnchanged: @escaping @Sendable () -> Bool
    ) async throws -> CopyReport {
        let tables = Self.copyOrder(try source.tables().filter { !Self.copySkippedTables.contains($0) })
        return try await transaction { [self] connection in
            try await connection.query("SET LOCAL statement_timeout = 0", logger: queryLogger)
            try await connection.query("SET LOCAL idle_in_transaction_session_timeout = 0", logger: queryLogger)
            try await connection.query("LOCK TABLE users IN EXCLUSIVE MODE", logger: queryLogger)
            if let held = try await Self.heldTable(tables, on: connection, logger: queryLogger) {
                throw IdentityCopyError("the target database already holds identity data (\(held)): copy into an empty database")
            }
            // The email reservation's trigger takes one advisory lock per address, each held to the
            // commit: a copy of many users would run out of lock slots. The copied rows need no
            // check (they come from a store that kept the rule), so it is off for this transaction.
            try await connection.query("ALTER TABLE users DISABLE TRIGGER users_email_reserved", logger: queryLogger)
            var report = CopyReport()
            // Both schemas name tables and columns alike (SQLite's migration 0015 took PostgreSQL's names).
            for table in tables {
                let types = try await Self.columnTypes(table, on: connection, logger: queryLogger)
                guard !types.isEmpty else {
                    throw IdentityCopyError("the PostgreSQL identity store has no table \(table), which the SQLite file has: is this Gatehouse older than the file?")
                }
                let columns = try source.columns(table)
                for column in columns where types[column] == nil {
                    throw IdentityCopyError("the PostgreSQL table \(table) has no column \(column), which the SQLite file's \(table) has")
                }
                // Rows the migrations made (a one-row state table) are replaced by the copied ones.
                if Self.copyStateTables.contains(table) {
                    try await connection.query(PostgresQuery(unsafeSQL: "DELETE FROM \(table)"), logger: queryLogger)
                }
                var after: Int64 = 0
                var copied = 0
                while true {
                    let (rows, last) = try source.rows(table, after: after, limit: batch)
                    if rows.isEmpty { break }
                    try await Self.insert(table, columns, types, rows, on: connection, logger: queryLogger)
                    copied += rows.count
                    after = last
                }
                report.rows[table] = copied
                try await Self.advanceSequences(table, past: try source.sequence(table), on: connection, logger: queryLogger)
            }
            try await copyPositions(source, on: connection)
            try await connection.query("ALTER TABLE users ENABLE TRIGGER users_email_reserved", logger: queryLogger)

            // Checked before the commit: a copy that does not match is rolled back.
            for table in tables {
                var count: Int64 = 0
                for try await n in try await connection.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)"), logger: queryLogger)
                    .decode(Int64.self)
                { count = n }
                let expected = try source.count(table)
                guard count == expected else {
                    throw IdentityCopyError("the copy does not match (nothing was kept): \(table) has \(expected) rows in SQLite, \(count) in PostgreSQL")
                }
            }
            report.sampled = try await checkSignIns(source, sample: sample, on: connection)
            guard sourceUnchanged() else {
                throw IdentityCopyError("the source was opened by another process during the copy (nothing was kept): stop the identity service and copy again")
            }
            return report
        }
    }

    /// The one-row tables the migrations fill, which a copy replaces.
    static let copyStateTables: Set<String> = ["change_log_state"]

    /// The first of `tables` (SQLite's, named alike in PostgreSQL) whose PostgreSQL table holds
    /// rows other than the migrations' own, or nil when the target is empty.
    static func heldTable(_ tables: [String], on connection: PostgresConnection, logger: Logger) async throws -> String? {
        for table in tables where !copyStateTables.contains(table) {
            guard try await !columnTypes(table, on: connection, logger: logger).isEmpty else { continue }
            for try await n in try await connection.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)"), logger: logger).decode(Int64.self)
            where n > 0 {
                return table
            }
        }
        return nil
    }

    /// Whether this database already holds identity data that a copy would refuse (checked by
    /// `gatehouse store copy` before it copies anything).
    public func holdsCopyTarget(tables: [String]) async throws -> String? {
        try await run { [queryLogger] connection in try await Self.heldTable(tables, on: connection, logger: queryLogger) }
    }

    /// The change log's and the audit log's positions: the next number follows every one the
    /// source ever gave (pruned ones too), so a stream resumed after the move misses nothing.
    func copyPositions(_ source: any IdentityCopySource, on connection: PostgresConnection) async throws {
        for (table, counter) in Self.copyCounters {
            let head = try source.sequence(table)
            try await connection.query(PostgresQuery(unsafeSQL: counter.replacingOccurrences(of: "$HEAD", with: "\(head)")), logger: queryLogger)
        }
    }

    /// Per AUTOINCREMENT table of SQLite whose numbers PostgreSQL draws from a counter row, the
    /// statement that moves the counter to at least `$HEAD` (SQLite's greatest number ever given,
    /// a number read from the file, never input) and past every copied row.
    static let copyCounters: [(table: String, statement: String)] = [
        ("user_changes", "UPDATE change_log_counter SET head = greatest(head, $HEAD, (SELECT coalesce(max(seq), 0) FROM user_changes))"),
        ("audit_log", "UPDATE audit_log_counter SET head = greatest(head, $HEAD, (SELECT coalesce(max(seq), 0) FROM audit_log))"),
    ]

    /// Checks `sample` users picked at random: found by their normalized email, with the same id
    /// and password hash (what a sign-in reads), and the same record by id. The number checked.
    func checkSignIns(_ source: any IdentityCopySource, sample: Int, on connection: PostgresConnection) async throws -> Int {
        let picked = try source.sampleUsers(sample)
        for user in picked {
            let byEmail: UserRecord?
            if let normalized = user.emailNormalized {
                byEmail = try await Self.user(where: "email_normalized", normalized, on: connection, logger: queryLogger)
            } else {
                byEmail = try await Self.user(where: "id", user.id.rawValue, on: connection, logger: queryLogger)
            }
            guard let found = byEmail, found.id == user.id, found.passwordHash == user.passwordHash, found == user else {
                throw IdentityCopyError("the copy does not match (nothing was kept): user \(user.id) does not read back as stored")
            }
        }
        return picked.count
    }

    /// The columns of `table` and their PostgreSQL types (`information_schema.columns.data_type`).
    static func columnTypes(_ table: String, on connection: PostgresConnection, logger: Logger) async throws -> [String: String] {
        var types: [String: String] = [:]
        let rows = try await connection.query(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = \(table)",
            logger: logger)
        for try await (name, type) in rows.decode((String, String).self) { types[name] = type }
        return types
    }

    /// Inserts `rows` (SQLite's values) into `table`, each value converted to its column's type.
    static func insert(
        _ table: String, _ columns: [String], _ types: [String: String], _ rows: [[CopiedValue]],
        on connection: PostgresConnection, logger: Logger
    ) async throws {
        var bindings = PostgresBindings(capacity: rows.count * columns.count)
        var tuples: [String] = []
        var n = 0
        for row in rows {
            var placeholders: [String] = []
            for (value, column) in zip(row, columns) {
                n += 1
                placeholders.append("$\(n)")
                try bind(value, as: types[column] ?? "text", column: "\(table).\(column)", into: &bindings)
            }
            tuples.append("(" + placeholders.joined(separator: ", ") + ")")
        }
        // Table and column names come from the two schemas; every value is a bind.
        let sql = "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES " + tuples.joined(separator: ", ")
        try await connection.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: logger)
    }

    static func bind(_ value: CopiedValue, as type: String, column: String, into bindings: inout PostgresBindings) throws {
        switch (value, type) {
        case (.null, _): bindings.appendNull()
        case (.int(let int), "boolean"): bindings.append(int != 0)
        case (.int(let int), "bigint"), (.int(let int), "integer"), (.int(let int), "smallint"): bindings.append(int)
        case (.real(let real), "double precision"), (.real(let real), "real"): bindings.append(real)
        case (.int(let int), "double precision"): bindings.append(Double(int))
        // NUL (refused by PostgreSQL's text) may be in rows written before it was stripped.
        case (.text(let text), "text"), (.text(let text), "json"), (.text(let text), "jsonb"):
            bindings.append(text.contains("\u{0}") ? text.replacingOccurrences(of: "\u{0}", with: "") : text)
        case (.blob(let data), "bytea"): try bindings.append(data)
        case (.text(let text), "bytea"): try bindings.append(Data(text.utf8))
        case (.int(let int), "text"): bindings.append(String(int))
        default:
            throw IdentityCopyError("cannot copy SQLite's \(value) into \(column), a PostgreSQL \(type)")
        }
    }

    /// Moves every serial or identity column's sequence of `table` past the copied rows and past
    /// `past` (SQLite's greatest number ever given in it: a deleted row's id is not given again).
    static func advanceSequences(_ table: String, past: Int64, on connection: PostgresConnection, logger: Logger) async throws {
        let rows = try await connection.query(
            """
            SELECT column_name, pg_get_serial_sequence(\(table), column_name) FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = \(table) AND pg_get_serial_sequence(\(table), column_name) IS NOT NULL
            """, logger: logger)
        var serials: [(String, String)] = []
        for try await (column, sequence) in rows.decode((String, String).self) { serials.append((column, sequence)) }
        for (column, sequence) in serials {
            try await connection.query(
                "SELECT setval(\(sequence)::regclass, greatest((SELECT max(\(unescaped: column)) FROM \(unescaped: table)), \(past), 1))",
                logger: logger)
        }
    }
}
