import GRDB
import GRDBSQLite
import Synchronization

/// Read-only SQLite connections of its own for point reads, each with its prepared statements.
///
/// GRDB's reader pool wraps every read in a semaphore, a lock and a `DispatchQueue.sync` onto
/// the connection's queue: in a profile of `GET /v1/me` that was a third of the identity
/// service's time per `getUser`, more than SQLite's own. Here a read takes an idle connection
/// from a list under a mutex (opening one if none is idle), steps its prepared statement on the
/// calling thread and puts the connection back. Reads only; writes stay with GRDB.
///
/// WAL mode lets these connections read while GRDB's writer commits; each read is its own
/// (implicit) read transaction, so it sees every commit that finished before it started.
public final class RawReadPool: Sendable {
    /// The memory map each connection reads the database file through (see
    /// `WALCheckpointer.connectionPragmas`).
    public static let mmapSize = 256 << 20

    /// The database file the connections open (read-only).
    public let path: String
    /// Idle connections kept; more may be open at once, the excess closed when returned.
    public let maxIdle: Int
    /// Bytes of the database file each connection reads through a memory map (0: `pread`). A
    /// map pays off when reads outnumber commits: in WAL mode SQLite unmaps a connection's whole
    /// map at the start of any read that finds the WAL changed since its previous one.
    public let memoryMapSize: Int
    private let idle = Mutex<[Connection]>([])

    /// A pool for the database at `path`; connections open on first use, not here.
    public init(path: String, maxIdle: Int = 8, memoryMapSize: Int = RawReadPool.mmapSize) {
        self.path = path
        self.maxIdle = maxIdle
        self.memoryMapSize = memoryMapSize
    }

    deinit {
        for connection in idle.withLock({ $0 }) { connection.close() }
    }

    /// Binds `arguments`, steps `sql` once and hands the row, if any, to `row`. SQLite errors
    /// are thrown as GRDB `DatabaseError`s.
    public func read<T>(sql: String, arguments: [RawArgument], _ row: (RawRow) throws -> T) throws -> T? {
        let connection = try idle.withLock { $0.popLast() } ?? Connection(path: path, memoryMapSize: memoryMapSize)
        defer {
            let kept = idle.withLock { list -> Bool in
                guard list.count < maxIdle else { return false }
                list.append(connection)
                return true
            }
            if !kept { connection.close() }
        }
        return try connection.read(sql: sql, arguments: arguments, row)
    }

    /// One read-only connection and its statements; used by one thread at a time (it is taken
    /// from the idle list under the mutex, and only put back when its read is over).
    final class Connection: @unchecked Sendable {
        let handle: OpaquePointer
        private var statements: [String: OpaquePointer] = [:]
        private var closed = false

        init(path: String, memoryMapSize: Int) throws {
            var handle: OpaquePointer?
            let code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil)
            guard code == SQLITE_OK, let handle else {
                let message = handle.map { String(cString: sqlite3_errmsg($0)) }
                sqlite3_close_v2(handle)
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message)
            }
            sqlite3_busy_timeout(handle, 5000)
            sqlite3_exec(handle, "PRAGMA mmap_size = \(memoryMapSize)", nil, nil, nil)
            self.handle = handle
        }

        func statement(_ sql: String) throws -> OpaquePointer {
            if let cached = statements[sql] { return cached }
            var statement: OpaquePointer?
            let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
            guard code == SQLITE_OK, let statement else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(handle)), sql: sql)
            }
            statements[sql] = statement
            return statement
        }

        func read<T>(sql: String, arguments: [RawArgument], _ row: (RawRow) throws -> T) throws -> T? {
            let statement = try statement(sql)
            return try RawStatement.step(statement, arguments: arguments, row) { code in
                DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(self.handle)), sql: sql)
            }
        }

        func close() {
            guard !closed else { return }
            closed = true
            for statement in statements.values { sqlite3_finalize(statement) }
            statements = [:]
            sqlite3_close_v2(handle)
        }

        deinit { close() }
    }
}
