import Crypto
import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import RPCRouting

/// Admin API keys (issue 22 §1): made by `gatehouse admin keys create` (the secret shown once, its
/// SHA-256 stored), checked by the admin listener at every request (so a revoked key is refused at
/// once), revoked by `gatehouse admin keys revoke`.
public struct AdminKeyHandlers: IdentityFeature {
    let basics: HandlerBasics
    let store: any AdminStore

    /// Registers the admin API's key methods.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.createAdminKey) { request, _ in try await createAdminKey(request) }
        router.register(IdentityAPI.listAdminKeys) { _, _ in try await listAdminKeys() }
        router.register(IdentityAPI.revokeAdminKey) { request, _ in try await revokeAdminKey(request) }
        router.register(IdentityAPI.authenticateAdminKey) { request, _ in try await authenticateAdminKey(request) }
    }

    /// The prefix of every admin API key.
    public static let adminKeyPrefix = "gha_"

    /// Makes a key (`SQLiteUserStore.createAdminKey`), audited as the operator's.
    public func createAdminKey(_ request: CreateAdminKeyRequest) async throws -> CreateAdminKeyResponse {
        let made = try await store.createAdminKey(name: request.name, scopes: request.scopes, now: clock.now)
        logger.notice("admin API key created", metadata: ["keyId": "\(made.key.id)", "scopes": "\(made.key.scopes.joined(separator: ","))"])
        return made
    }

    /// Every key, revoked ones included, oldest first.
    public func listAdminKeys() async throws -> AdminKeyList {
        AdminKeyList(keys: try await store.adminKeys())
    }

    /// Revokes a key: its next request is refused. `adminKeyNotFound` for an unknown id.
    public func revokeAdminKey(_ request: AdminKeyIDRequest) async throws -> AdminKey {
        guard request.id.utf8.count == 16 else { throw IdentityError.adminKeyNotFound }
        return try await store.revokeAdminKey(id: request.id, at: clock.now)
    }

    /// The active key whose token this is: `invalidAdminKey` for a malformed token, an unknown or
    /// revoked key, or a wrong secret (compared in constant time). Notes the use at most once a minute.
    public func authenticateAdminKey(_ request: AuthenticateAdminKeyRequest) async throws -> AdminKey {
        let token = request.token
        guard token.utf8.count == 64, token.hasPrefix(Self.adminKeyPrefix) else { throw IdentityError.invalidAdminKey }
        let body = token.dropFirst(Self.adminKeyPrefix.count)
        let id = String(body.prefix(16))
        let rest = body.dropFirst(16)
        guard rest.first == ".", let hash = IdentityInput.resetCodeHash(ifWellFormed: String(rest.dropFirst())) else {
            throw IdentityError.invalidAdminKey
        }
        guard let (key, stored) = try await store.activeAdminKey(id: id),
            PasswordHashing.constantTimeEquals(Array(stored), Array(hash))
        else { throw IdentityError.invalidAdminKey }
        let now = clock.now
        if key.lastUsedAt.map({ now.timeIntervalSince($0) >= 60 }) ?? true {
            try? await store.touchAdminKey(id: id, at: now)
        }
        return key
    }

    /// The scopes asked for, checked, without duplicates, sorted; `all` is every scope.
    public static func validScopes(_ asked: [String]) throws -> [String] {
        var scopes = Set<String>()
        for scope in asked {
            if scope == "all" { scopes.formUnion(AdminKey.Scope.all); continue }
            guard AdminKey.Scope.all.contains(scope) else {
                throw IdentityError.invalidArgument(
                    field: "scopes", reason: "unknown scope \(scope.prefix(64)); use \(AdminKey.Scope.all.joined(separator: ", ")) or all")
            }
            scopes.insert(scope)
        }
        guard !scopes.isEmpty else { throw IdentityError.invalidArgument(field: "scopes", reason: "give at least one scope") }
        return scopes.sorted()
    }
}
