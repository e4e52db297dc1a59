public import GRDB

/// How far an acknowledged write survives.
public enum Durability: Sendable, Equatable {
    /// Survives a crash or kill of the process (`synchronous = NORMAL`).
    case processCrash
    /// Also survives power loss or an OS crash (`synchronous = FULL`).
    case powerLoss

    /// The `synchronous` pragma value.
    var synchronous: String { self == .powerLoss ? "FULL" : "NORMAL" }
}

/// One service's SQLite database as both stores open it: a GRDB `DatabasePool` (one writer,
/// concurrent WAL readers) with foreign keys, a 5 s busy timeout, the durability's
/// `synchronous` and the checkpointer's connection pragmas; a `WALCheckpointer` that copies
/// the WAL back off the writer's path; and a `RawReadPool` for point reads on the calling thread.
public struct SQLiteFiles: Sendable {
    /// GRDB's pool: every write and every read that is not a point read.
    public let pool: DatabasePool
    /// Checkpoints the WAL off the writer's path.
    public let checkpointer: WALCheckpointer
    /// Connections of its own for point reads.
    public let pointReads: RawReadPool

    /// Opens (creating if needed) the database at `path`. Does not migrate (`migrate(_:)` is the
    /// explicit start-up step). `onCheckpointThreadStart` runs first on the checkpoint thread.
    public init(
        path: String, label: String, durability: Durability, pointReadMemoryMap: Int = RawReadPool.mmapSize,
        onCheckpointThreadStart: @escaping @Sendable () -> Void = {}
    ) throws {
        var config = Configuration()
        config.foreignKeysEnabled = true
        config.busyMode = .timeout(5)
        config.label = label
        let synchronous = durability.synchronous
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            for pragma in WALCheckpointer.connectionPragmas { try db.execute(sql: pragma) }
        }
        pool = try DatabasePool(path: path, configuration: config)
        checkpointer = try WALCheckpointer(path: path, onThreadStart: onCheckpointThreadStart)
        pointReads = RawReadPool(path: path, memoryMapSize: pointReadMemoryMap)
    }

    /// Applies every migration of `migrator` not yet applied.
    public func migrate(_ migrator: DatabaseMigrator) throws {
        try migrator.migrate(pool)
    }

    /// True for the errors a caller may retry: the database was busy or locked.
    public static func isBusy(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED
    }
}
