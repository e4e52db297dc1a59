import Foundation
import TokenPorts
import GatehouseContracts
import TokenCore

extension TokenService {
    /// When each of the asked users last used a session (`token.lastActivity`): the latest
    /// `lastUsedAt` (issue or last refresh) of its stored sessions; users without one are absent.
    /// Asked by the identity service's anonymous sweep, so the refresh path writes nothing for it.
    public func lastActivity(_ request: LastActivityRequest) async throws -> LastActivityResponse {
        guard request.userIDs.count <= TokenAPI.maxLastActivityUsers else {
            throw TokenError.invalidArgument("userIDs: at most \(TokenAPI.maxLastActivityUsers) users per call")
        }
        guard request.userIDs.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 128 }) else {
            throw TokenError.invalidArgument("userIDs: each must be 1 to 128 bytes")
        }
        let found = try await store.lastActivity(userIDs: request.userIDs)
        return LastActivityResponse(entries: found.map { UserActivity(userID: $0.key, lastUsedAt: $0.value) })
    }
}
