import Foundation
import IdentityCore

// `gatehouse store copy` (issue 24 §1), the identity side: what a copy reads from a stopped
// identity service's file, table by table, and what the target answers when it cannot keep it.

/// Why a copy could not be made (nothing was kept).
public struct IdentityCopyError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for the operator.
    public let description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}

/// One stored value, as SQLite holds it.
public enum CopiedValue: Sendable, Equatable {
    /// NULL.
    case null
    /// An INTEGER.
    case int(Int64)
    /// A REAL.
    case real(Double)
    /// TEXT.
    case text(String)
    /// A BLOB.
    case blob(Data)
}

/// A stopped identity service's database, read for a copy (`SQLiteUserStore.CopySource`).
public protocol IdentityCopySource: Sendable {
    /// The tables that hold data (not the database's own, not the migrations' record).
    func tables() throws -> [String]
    /// The columns of `table`, in order.
    func columns(_ table: String) throws -> [String]
    /// The number of rows of `table`.
    func count(_ table: String) throws -> Int
    /// The rows of `table` after the position `after`, at most `limit`, and the last position read.
    func rows(_ table: String, after: Int64, limit: Int) throws -> (rows: [[CopiedValue]], last: Int64)
    /// The highest position `table`'s sequence ever gave (0: none).
    func sequence(_ table: String) throws -> Int64
    /// Up to `count` users picked at random, as stored.
    func sampleUsers(_ count: Int) throws -> [UserRecord]
}
