import Foundation
import IdentityPorts
import GatehouseContracts
import IdentityCore
import RPCRouting

/// The change log's read methods (issue 21): `identity.listChanges` for a gateway catching up on
/// `user.changed`, `identity.userChanges` for a stream's snapshot or resume.
public struct ChangeHandlers: Sendable {
    let store: any ChangeLogStore

    /// Registers `identity.listChanges` and `identity.userChanges`.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.listChanges) { request, _ in try await listChanges(request) }
        router.register(IdentityAPI.userChanges) { request, _ in try await userChanges(request) }
    }

    /// Every user's changes after `afterSeq`, in order, at most `limit` (`identity.listChanges`).
    public func listChanges(_ request: ListChangesRequest) async throws -> ListChangesResponse {
        let limit = try Self.changesLimit(request.limit)
        return try await store.listChanges(afterSeq: request.afterSeq, limit: limit)
    }

    /// A user's snapshot, or its changes after `afterSeq` (`identity.userChanges`; see
    /// `UserChangesRequest`). `userNotFound` when there is no such user and no terminal change of
    /// it to replay.
    public func userChanges(_ request: UserChangesRequest) async throws -> UserChangesResponse {
        let id = try IdentityInput.validID(request.userID)
        let limit = try Self.changesLimit(request.limit)
        return try await store.userChanges(id: id, resume: request.resume, afterSeq: request.afterSeq, limit: limit)
    }

    /// A request's page size: 1 … `IdentityAPI.maxChangesPage`, 0 for the maximum.
    static func changesLimit(_ limit: Int32) throws -> Int {
        guard limit >= 0, limit <= IdentityAPI.maxChangesPage else {
            throw IdentityError.invalidArgument(field: "limit", reason: "must be 0 (the most) to \(IdentityAPI.maxChangesPage), not \(limit)")
        }
        return limit == 0 ? Int(IdentityAPI.maxChangesPage) : Int(limit)
    }
}
