public import GRDB
import GRDBSQLite

/// A GRDB cached statement driven through the SQLite C API, for the hottest point reads.
///
/// `Row.fetchOne` copies every column of the row into a `Row` (one `DatabaseValue` per
/// column, a heap string each) and then each typed read converts again; for a 16-column user
/// row that was most of a look-up's 25–30 µs. Here a row is read column by column straight from
/// SQLite's buffers into the caller's value, and the statement is reset (ending SQLite's
/// implicit read transaction) before `read` returns.
///
/// The SQL passed to `read` must be used through this type only: GRDB's own bookkeeping of the
/// statement's arguments is bypassed. Callers give each raw query its own SQL text (the cache
/// key), so no GRDB-executed statement is shared with it.
public enum RawStatement {
    /// Binds `arguments` (text or blob, 1-based in order), steps once and hands the row, if
    /// any, to `row`. Errors from SQLite are thrown as GRDB `DatabaseError`s.
    public static func read<T>(
        _ db: Database, sql: String, arguments: [RawArgument], _ row: (RawRow) throws -> T
    ) throws -> T? {
        let statement = try db.cachedStatement(sql: sql)
        return try step(statement.sqliteStatement, arguments: arguments, row) { code in error(db, code, sql) }
    }

    /// Resets `handle`, binds `arguments` (text or blob, 1-based in order), steps once and hands
    /// the row, if any, to `row`; resets the statement again (ending SQLite's implicit read
    /// transaction) before it returns. `failure` turns a SQLite result code into the error thrown.
    static func step<T>(
        _ handle: OpaquePointer, arguments: [RawArgument], _ row: (RawRow) throws -> T, failure: (Int32) -> any Error
    ) throws -> T? {
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        var code = sqlite3_reset(handle)
        guard code == SQLITE_OK else { throw failure(code) }
        // SQLITE_STATIC: the bytes stay valid until the step below, which runs inside the
        // closures that expose them.
        func bind(_ index: Int) throws -> Int32 {
            if index == arguments.count { return sqlite3_step(handle) }
            switch arguments[index] {
            case .text(let text):
                var text = text
                return try text.withUTF8 { bytes in
                    // A non-NULL pointer even for "" (NULL would bind SQL NULL); 0 bytes are read.
                    let base = UnsafeRawPointer(bytes.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                    let code = sqlite3_bind_text(handle, Int32(index + 1), base.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
                    guard code == SQLITE_OK else { throw failure(code) }
                    return try bind(index + 1)
                }
            case .blob(let bytes):
                return try bytes.withUnsafeBytes { raw in
                    let base = raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
                    let code = sqlite3_bind_blob(handle, Int32(index + 1), base, Int32(raw.count), nil)
                    guard code == SQLITE_OK else { throw failure(code) }
                    return try bind(index + 1)
                }
            }
        }
        code = try bind(0)
        switch code {
        case SQLITE_DONE: return nil
        case SQLITE_ROW: return try row(RawRow(handle: handle))
        default: throw failure(code)
        }
    }

    static func error(_ db: Database, _ code: Int32, _ sql: String) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: db.lastErrorMessage, sql: sql)
    }
}

/// An argument for `RawStatement.read`.
public enum RawArgument: Sendable {
    case text(String)
    case blob([UInt8])
}

/// The current row of a stepped statement; valid only inside `RawStatement.read`'s closure.
public struct RawRow {
    let handle: OpaquePointer

    /// Whether the column is NULL.
    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    /// The column as an integer (0 for NULL).
    public func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    /// The column as an integer, nil for NULL.
    public func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }

    /// The column as a boolean: true when its integer value is not 0.
    public func bool(_ column: Int32) -> Bool { sqlite3_column_int64(handle, column) != 0 }

    /// The column as UTF-8 text ("" for NULL).
    public func string(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// The column as UTF-8 text, nil for NULL.
    public func optionalString(_ column: Int32) -> String? { isNull(column) ? nil : string(column) }

    /// The column as bytes (empty for NULL).
    public func bytes(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let blob = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: blob, count: count))
    }
}
