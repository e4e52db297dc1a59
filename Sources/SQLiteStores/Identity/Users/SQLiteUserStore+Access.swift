import Foundation
import Mail
import GatehouseSupport
import GatehouseContracts
import IdentityPorts
import GRDB
import IdentityCore
import SQLiteSupport

// Access to the database and error translation: every write goes through `run` (which also
// appends the running call's audit event), every read through `read`.
extension SQLiteUserStore {
    /// Runs `body` in a write transaction. The audit event of the call running on this task
    /// (`AuditScope.current`), if not written yet, is appended in the same transaction.
    func run<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        guard let audit = AuditScope.current else {
            do {
                return try await pool.write(body)
            } catch {
                throw Self.translate(error)
            }
        }
        do {
            let result = try await pool.write { db in
                let result = try body(db)
                if let event = audit.take() { try Self.appendAudit(event, in: db) }
                return result
            }
            audit.settle(committed: true)
            return result
        } catch {
            audit.settle(committed: false)
            throw Self.translate(error)
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await pool.read(body)
        } catch {
            throw Self.translate(error)
        }
    }

    /// Turns any error from GRDB or SQLite into an `IdentityError` (or cancellation).
    static func translate(_ error: any Error) -> any Error {
        switch error {
        case let error as IdentityError:
            return error
        case is CancellationError:
            return error
        case let error as DatabaseError:
            let message = error.message ?? ""
            switch error.extendedResultCode {
            case .SQLITE_CONSTRAINT_UNIQUE where message.contains("users.email_normalized"),
                .SQLITE_CONSTRAINT_TRIGGER where message.contains("email_reserved"):
                return IdentityError.emailExists
            case .SQLITE_CONSTRAINT_PRIMARYKEY where message.contains("identities."):
                return IdentityError.invalidArgument(field: "identity", reason: "already linked to a user")
            case .SQLITE_CONSTRAINT_FOREIGNKEY:
                return IdentityError.userNotFound
            case .SQLITE_CONSTRAINT_CHECK, .SQLITE_CONSTRAINT_NOTNULL:
                return IdentityError.invalidArgument(field: "user", reason: "breaks a storage invariant")
            default:
                break
            }
            return SQLiteFiles.isBusy(error) ? IdentityError.unavailable(cause: "\(error)") : IdentityError.storage(cause: "\(error)")
        default:
            return IdentityError.storage(cause: String(reflecting: error))
        }
    }
}
