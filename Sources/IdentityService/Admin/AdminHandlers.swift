import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import Logging
import ProtoCodec
import RPCRouting
import Mail

/// The operator's user operations (`gatehouse users ...`) and the admin API's (issue 22 §1).
/// Each writing one is audited with the request's actor (`admin_key:<id>`, or the operator); a
/// change that ends access (disable, a new password, delete) revokes the user's sessions,
/// committed in the token service, before it answers.
public struct AdminHandlers: IdentityFeature {
    let basics: HandlerBasics
    let store: any UserStore & AdminStore
    let passwords: NewPasswords
    /// The settings every new user gets.
    let defaultSettingsJSON: String
    /// The links of generated action codes, and their lifetimes.
    let mail: MailParts

    /// Registers the operator's and the admin API's user methods.
    func register(_ router: inout RPCRouter) {
        router.register(IdentityAPI.deleteUser) { request, _ in try await deleteUser(request) }
        router.register(IdentityAPI.setDisabled) { request, _ in try await setDisabled(request) }
        router.register(IdentityAPI.setCustomClaims) { request, _ in try await setCustomClaims(request) }
        router.register(IdentityAPI.listUsers) { request, _ in try await listUsers(request) }
        router.register(IdentityAPI.adminGetUser) { request, _ in try await adminGetUser(request) }
        router.register(IdentityAPI.adminCreateUser) { request, context in try await adminCreateUser(request, deadline: context.deadline) }
        router.register(IdentityAPI.adminUpdateUser) { request, context in try await adminUpdateUser(request, deadline: context.deadline) }
        router.register(IdentityAPI.adminDeleteUser) { request, _ in try await adminDeleteUser(request) }
        router.register(IdentityAPI.adminSetClaims) { request, _ in try await adminSetClaims(request) }
        router.register(IdentityAPI.revokeUserSessions) { request, _ in try await revokeUserSessions(request) }
        router.register(IdentityAPI.generateActionLink) { request, _ in try await generateActionLink(request) }
    }

    /// The audit actor a request names: `admin_key:<id>` (at most 128 bytes), or the operator.
    static func adminActor(_ actor: String) throws -> String {
        if actor.isEmpty { return AuditEvent.Actor.operator }
        guard actor.utf8.count <= 128 else { throw IdentityError.invalidArgument(field: "actor", reason: "longer than 128 bytes") }
        return actor
    }

    /// Revokes the user's sessions in the token service, deletes the user and its linked
    /// identities, revokes again (a racing sign-in's session), all committed before this returns,
    /// then publishes `user.deleted` (`identity.deleteUser`). A retry after a failed revocation
    /// answers `userNotFound`, and revokes them all the same.
    public func deleteUser(_ request: UserIDRequest) async throws -> Empty {
        let id = try IdentityInput.validID(request.userID)
        return try await audited(AuditEvent.Kind.userDeleted, actor: AuditEvent.Actor.operator, userID: id.rawValue) {
            try await deleteUserAudited(id)
        }
    }

    func deleteUserAudited(_ id: UserID) async throws -> Empty {
        if try await store.user(id: id) != nil { try await revokeSessions(of: id, reason: "user_deleted") }
        do { try await store.delete(id: id) } catch IdentityError.userNotFound {
            try await revokeSessions(of: id, reason: "user_deleted")
            throw IdentityError.userNotFound
        }
        try await revokeSessions(of: id, reason: "user_deleted")
        let event = UserEvent(userID: id.rawValue, version: 0, occurredAt: clock.now)
        await publish(IdentityAPI.Topic.userDeleted, event)
        return Empty()
    }

    /// Disables or enables a user. Disabling revokes the user's sessions in the token service
    /// (committed there before this returns; again on a repeated call, so a retry after a failed
    /// revocation completes it) and publishes `user.disabled`.
    public func setDisabled(_ request: SetDisabledRequest) async throws -> User {
        let id = try IdentityInput.validID(request.userID)
        let kind = request.disabled ? AuditEvent.Kind.userDisabled : AuditEvent.Kind.userEnabled
        return try await audited(kind, actor: AuditEvent.Actor.operator, userID: id.rawValue) { try await setDisabledAudited(request, id: id) }
    }

    private func setDisabledAudited(_ request: SetDisabledRequest, id: UserID) async throws -> User {
        guard let current = try await store.user(id: id) else { throw IdentityError.userNotFound }
        if current.disabled == request.disabled {
            if request.disabled { try await revokeSessions(of: id, reason: "user_disabled") }
            return User(current)
        }
        let user = try await store.update(id: id, expectedVersion: nil, now: clock.now) { $0.disabled = request.disabled }
        if request.disabled { try await revokeSessions(of: id, reason: "user_disabled") }
        await publish(request.disabled ? IdentityAPI.Topic.userDisabled : IdentityAPI.Topic.userUpdated, user)
        return User(user)
    }

    /// Sets a user's custom claims (`identity.setCustomClaims`): a JSON object of at most 1,000
    /// bytes without reserved names (`CustomClaims`); "" or `{}` clears them. The token service
    /// reads them at each refresh (`claimsForSession`), so they are in the user's access tokens
    /// from the next refresh on. Publishes `user.updated`.
    public func setCustomClaims(_ request: SetCustomClaimsRequest) async throws -> User {
        let id = try IdentityInput.validID(request.userID)
        let claims = try CustomClaims.validated(request.claimsJSON)
        let user = try await audited(AuditEvent.Kind.claimsSet, actor: AuditEvent.Actor.operator, userID: id.rawValue) {
            try await store.update(id: id, expectedVersion: nil, now: clock.now) { $0.customClaimsJSON = claims }
        }
        let event = UserEvent(userID: user.id.rawValue, version: user.version, occurredAt: user.updatedAt)
        do {
            await events.publish(topic: IdentityAPI.Topic.userUpdated, payload: try ProtobufEncoder().encode(event))
        } catch {
            logger.warning("event \(IdentityAPI.Topic.userUpdated) does not encode: \(error)")
        }
        return User(user)
    }
}
