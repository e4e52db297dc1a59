import Foundation
import Mail
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
import GRDB
import IdentityCore
import SQLiteSupport

// `gatehouse store copy` (issue 24 §1), the identity side: a stopped identity service's
// identity.sqlite read table by table, row by row, as it is stored, for a copy into PostgreSQL
// (`PostgresUserStore.copy`). The reader knows no table: the target's schema says what each
// column becomes.
extension SQLiteUserStore {
    /// A stopped identity service's database, opened read-only.
    public final class CopySource: IdentityCopySource {
        let queue: DatabaseQueue

        /// Opens the file at `path` read-only; throws when it is missing or not fully migrated
        /// (start and stop the identity service of this version once first).
        public init(path: String) throws {
            queue = try SQLiteFiles.openCopySource(path, service: "identity", migrator: SQLiteUserStore.migrator, makeError: IdentityCopyError.init)
        }

        /// The tables that hold data (not SQLite's own, not the migrations' record).
        public func tables() throws -> [String] {
            try queue.read { db in
                try String.fetchAll(
                    db, sql: """
                        SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'grdb_migrations'
                        ORDER BY name
                        """)
            }
        }

        /// The columns of `table`, in order.
        public func columns(_ table: String) throws -> [String] {
            try queue.read { db in try db.columns(in: table).map(\.name) }
        }

        /// The number of rows of `table`.
        public func count(_ table: String) throws -> Int {
            try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table.quotedDatabaseIdentifier)") ?? 0 }
        }

        /// Up to `limit` rows of `table` after the row `after` (a rowid; 0 from the first), with
        /// the rowid of the last; every row of a table without rowids at once.
        public func rows(_ table: String, after: Int64, limit: Int) throws -> (rows: [[CopiedValue]], last: Int64) {
            try queue.read { db in
                let name = table.quotedDatabaseIdentifier
                let hasRowID = try Bool.fetchOne(
                    db, sql: "SELECT NOT (sql LIKE '%WITHOUT ROWID%') FROM sqlite_master WHERE type = 'table' AND name = ?", arguments: [table]) ?? true
                guard hasRowID else {
                    guard after == 0 else { return ([], after) }
                    let rows = try Row.fetchAll(db, sql: "SELECT * FROM \(name)")
                    return (rows.map(Self.values), rows.isEmpty ? 0 : 1)
                }
                let rows = try Row.fetchAll(
                    db, sql: "SELECT rowid, * FROM \(name) WHERE rowid > ? ORDER BY rowid LIMIT ?", arguments: [after, limit])
                let last: Int64 = rows.last?[0] ?? after
                return (rows.map { Array(Self.values($0).dropFirst()) }, last)
            }
        }

        /// The greatest AUTOINCREMENT value ever given in `table` (0: none), which pruning keeps.
        public func sequence(_ table: String) throws -> Int64 {
            try queue.read { db in
                try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = ?", arguments: [table]) ?? 0
            }
        }

        static func values(_ row: Row) -> [CopiedValue] {
            row.databaseValues.map { value in
                switch value.storage {
                case .null: .null
                case .int64(let int): .int(int)
                case .double(let double): .real(double)
                case .string(let string): .text(string)
                case .blob(let data): .blob(data)
                }
            }
        }
    }
}

extension SQLiteUserStore.CopySource {
    /// Up to `count` users picked at random, as stored.
    public func sampleUsers(_ count: Int) throws -> [UserRecord] {
        try queue.read { db in
            try Row.fetchAll(
                db, sql: SQLiteUserStore.selectByIDSQL.replacingOccurrences(of: "WHERE id = ?", with: "ORDER BY random() LIMIT ?"),
                arguments: [count]
            ).map(SQLiteUserStore.record)
        }
    }
}
