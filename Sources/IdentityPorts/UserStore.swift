import Foundation
import IdentityCore

/// Where users live. Implementations translate their own failures into `IdentityError`
/// (`emailExists`, `userNotFound`, `versionConflict`, `unavailable`, `storage`) and let no
/// other error escape. Every method is safe to call from any task; none blocks the cooperative
/// thread pool.
public protocol UserStore: Sendable {
    /// Inserts a new user. Throws `emailExists` when the normalized email is taken.
    func insert(_ user: UserRecord) async throws

    /// The user with this id, or nil.
    func user(id: UserID) async throws -> UserRecord?

    /// The user with this normalized email, or nil.
    func user(normalizedEmail: String) async throws -> UserRecord?

    /// Reads the user, applies `change`, bumps `version` and sets `updatedAt` to `now`, all in one
    /// transaction. With `expectedVersion`, throws `versionConflict` when the stored version
    /// differs. Throws `userNotFound`. Returns the stored result.
    func update(
        id: UserID, expectedVersion: Int64?, now: Date, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord

    /// Records a successful sign-in (`lastSignInAt`), and replaces the password hash by
    /// `newPasswordHash` (an upgrade of the same password) only while the stored hash is still
    /// `replacing`, the one the sign-in verified: a password changed meanwhile is never
    /// overwritten by the old password's rehash. Does not change `version`. Throws `userNotFound`.
    func recordSignIn(id: UserID, at: Date, newPasswordHash: String?, replacing: String?) async throws

    /// Deletes the user and its linked identities. Throws `userNotFound`.
    func delete(id: UserID) async throws

    /// Links a provider identity to a user. Throws `userNotFound` for an unknown user and
    /// `invalidArgument` when the identity is already linked.
    func linkIdentity(provider: String, subject: String, to user: UserID, at: Date) async throws

    /// The user linked to a provider identity, or nil.
    func userID(provider: String, subject: String) async throws -> UserID?

    /// The number of users (for tests and metrics).
    func count() async throws -> Int

    /// Deletes the user and its linked identities only while it is anonymous, in one step (a
    /// user upgraded meanwhile is kept). Throws `userNotFound` when no anonymous user has this id.
    func deleteAnonymous(id: UserID) async throws
}

extension UserStore {
    /// Checks, then deletes: for stores that cannot do both in one step.
    public func deleteAnonymous(id: UserID) async throws {
        guard try await user(id: id)?.isAnonymous == true else { throw IdentityError.userNotFound }
        try await delete(id: id)
    }
}

/// A store whose point reads answer on the calling thread without suspending (SQLite through
/// `unsafeRead`). The identity service then serves `getUser` and `claimsForSession` as
/// synchronous RPC handlers, answered on the RPC server's I/O thread without a task.
public protocol SynchronousPointReads: UserStore {
    /// `user(id:)`, on the calling thread.
    func userNow(id: UserID) throws -> UserRecord?
}
