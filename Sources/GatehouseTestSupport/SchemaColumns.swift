import Foundation
import GRDB

/// The tables and columns of the two schemas, read from what makes them (a migrated SQLite file;
/// the PostgreSQL migrations' DDL), for the tests that keep one naming scheme for both stores.
public enum SchemaColumns {
    /// Every table of the SQLite database (not SQLite's own, not GRDB's record of migrations)
    /// and its columns, in order.
    public static func sqlite(_ db: Database) throws -> [String: [String]] {
        let tables = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'grdb_migrations'")
        var columns: [String: [String]] = [:]
        for table in tables { columns[table] = try db.columns(in: table).map(\.name) }
        return columns
    }

    /// What keeps the SQLite schema `sqlite` from having the PostgreSQL schema `postgres`'s names,
    /// one line per problem (none: they agree): a column with an uppercase letter; a table with no
    /// PostgreSQL table (named by `postgresName`, the same name by default); an extra of
    /// `postgresOnly` PostgreSQL lacks; columns that differ, but for those extras; a rename of
    /// `renames` not done.
    public static func mismatches(
        sqlite: [String: [String]], postgres: [String: [String]], postgresName: (String) -> String? = { $0 },
        postgresOnly: [String: Set<String>], renames: [(table: String, columns: [(old: String, new: String)])]
    ) -> [String] {
        var problems: [String] = []
        for (table, columns) in sqlite.sorted(by: { $0.key < $1.key }) {
            if !columns.allSatisfy({ $0 == $0.lowercased() }) { problems.append("\(table): \(columns)") }
            guard let target = postgresName(table) else { problems.append("no PostgreSQL table named for \(table)"); continue }
            guard let theirs = postgres[target] else { problems.append("PostgreSQL has no table \(target)"); continue }
            let extra = postgresOnly[target] ?? []
            if !Set(theirs).isSuperset(of: extra) { problems.append("\(target): \(extra) not in PostgreSQL's \(theirs)") }
            if Set(columns) != Set(theirs).subtracting(extra) { problems.append("\(table): SQLite \(columns), PostgreSQL \(theirs)") }
        }
        for (table, pairs) in renames {
            guard let columns = sqlite[table] else { problems.append("no table \(table)"); continue }
            for (old, new) in pairs where !(columns.contains(new) && !columns.contains(old)) { problems.append("\(table).\(old) → \(new)") }
        }
        return problems
    }

    /// The tables `statements` (PostgreSQL DDL, run in order) leave and their columns, in order:
    /// `CREATE TABLE`, `DROP TABLE`, and `ALTER TABLE` that adds, drops or renames a column or
    /// renames the table. Unquoted names, as the migrations write them.
    public static func postgres(_ statements: [String]) -> [String: [String]] {
        var tables: [String: [String]] = [:]
        for statement in statements {
            let text = statement.trimmingCharacters(in: .whitespacesAndNewlines)
            let words = text.split(whereSeparator: \.isWhitespace).map(String.init)
            let upper = words.map { $0.uppercased() }
            if upper.starts(with: ["CREATE", "TABLE"]), words.count > 2 {
                let name = String(words[2].prefix { $0 != "(" })
                tables[name] = definitions(text).compactMap(columnName)
            } else if upper.starts(with: ["DROP", "TABLE"]), words.count > 2 {
                tables[words[2]] = nil
            } else if upper.starts(with: ["ALTER", "TABLE"]), words.count > 5 {
                let table = words[2]
                switch (upper[3], upper[4]) {
                case ("ADD", "COLUMN"): tables[table, default: []].append(words[5])
                case ("DROP", "COLUMN"): tables[table]?.removeAll { $0 == words[5] }
                case ("RENAME", "COLUMN") where words.count > 7:
                    tables[table] = tables[table]?.map { $0 == words[5] ? words[7] : $0 }
                case ("RENAME", "TO"):
                    tables[words[5]] = tables.removeValue(forKey: table)
                default: break
                }
            }
        }
        return tables
    }

    /// The comma-separated parts of the first parenthesized list of a `CREATE TABLE`, split at the
    /// top level only (not inside a CHECK's parentheses or a string).
    static func definitions(_ create: String) -> [String] {
        guard let open = create.firstIndex(of: "(") else { return [] }
        var parts: [String] = []
        var current = ""
        var depth = 0
        var quoted = false
        for character in create[create.index(after: open)...] {
            if character == "'" { quoted.toggle() }
            if !quoted {
                if character == "(" { depth += 1 }
                if character == ")" {
                    if depth == 0 { break }
                    depth -= 1
                }
                if character == ",", depth == 0 {
                    parts.append(current)
                    current = ""
                    continue
                }
            }
            current.append(character)
        }
        parts.append(current)
        return parts
    }

    /// The column a table definition's part names, or nil for a table constraint.
    static func columnName(_ definition: String) -> String? {
        guard let first = definition.split(whereSeparator: \.isWhitespace).first.map(String.init) else { return nil }
        let constraints: Set<String> = ["CHECK", "PRIMARY", "UNIQUE", "FOREIGN", "CONSTRAINT", "EXCLUDE"]
        return constraints.contains(first.uppercased()) ? nil : first
    }

    /// The SQL of every index, trigger and view of the SQLite database, by name.
    public static func sqliteDependents(_ db: Database) throws -> [String: String] {
        let rows = try Row.fetchAll(
            db, sql: "SELECT name, sql FROM sqlite_master WHERE type IN ('index', 'trigger', 'view') AND sql IS NOT NULL")
        return Dictionary(uniqueKeysWithValues: rows.map { ($0["name"], $0["sql"]) })
    }

    /// `sql` split into its text outside single-quoted string literals and those literals
    /// (without their quotes).
    public static func splitLiterals(_ sql: String) -> (code: String, literals: [String]) {
        var code = ""
        var literals: [String] = []
        var literal: String?
        for character in sql {
            if character == "'" {
                if let open = literal {
                    literals.append(open)
                    literal = nil
                } else {
                    literal = ""
                }
                code.append(" ")
            } else if literal != nil {
                literal?.append(character)
            } else {
                code.append(character)
            }
        }
        return (code, literals)
    }

    /// The words of `text` (letters, digits and `_`), in order.
    public static func words(_ text: String) -> [String] {
        text.split { !($0.isLetter || $0.isNumber || $0 == "_") }.map(String.init)
    }
}
