import Foundation
import IdentityPorts
import GatehouseContracts
import GatehouseSupport
import IdentityCore
import RPCRouting

// The admin API's user operations (issue 22 §1). Each writing one is audited with the request's
// actor (`admin_key:<id>`); a change that ends access (disable, a new password, delete) revokes
// the user's sessions, committed in the token service, before it answers.
extension AdminHandlers {
    /// A filtered page of users in id order (`identity.listUsers`).
    public func listUsers(_ request: ListUsersRequest) async throws -> ListUsersResponse {
        guard (0...maxUsersPage).contains(request.limit) else {
            throw IdentityError.invalidArgument(field: "limit", reason: "must be between 1 and \(maxUsersPage)")
        }
        let limit = request.limit == 0 ? 100 : Int(request.limit)
        guard request.cursor.isEmpty || UserID.isWellFormed(request.cursor) else {
            throw IdentityError.invalidArgument(field: "cursor", reason: "not a cursor of this listing")
        }
        // Normalized as stored addresses are (NFKC, lower case), so full-width or decomposed input matches.
        let trimmed = request.emailPrefix.trimmingCharacters(in: .whitespaces)
        let prefix = (trimmed.utf8.allSatisfy { $0 < 0x80 } ? trimmed : trimmed.precomposedStringWithCompatibilityMapping).lowercased()
        guard prefix.utf8.count <= 254 else { throw IdentityError.invalidArgument(field: "emailPrefix", reason: "longer than 254 bytes") }
        guard request.provider.utf8.count <= 64 else { throw IdentityError.invalidArgument(field: "provider", reason: "longer than 64 bytes") }
        var filter = UserFilter()
        filter.emailPrefix = prefix
        filter.provider = request.provider
        filter.disabled = request.disabled
        filter.anonymous = request.anonymous
        filter.createdAfter = try IdentityInput.auditableDate(request.createdAfter, "createdAfter")
        filter.createdBefore = try IdentityInput.auditableDate(request.createdBefore, "createdBefore")
        let (users, more) = try await store.users(filter: filter, after: request.cursor, limit: limit)
        return ListUsersResponse(users: users.map(AdminUser.init), nextCursor: more ? users.last?.id.rawValue ?? "" : "")
    }

    /// One user with its custom claims.
    public func adminGetUser(_ request: AdminUserRequest) async throws -> AdminUser {
        guard let user = try await store.user(id: try IdentityInput.validID(request.userID)) else { throw IdentityError.userNotFound }
        return AdminUser(user)
    }

    /// Creates a user (no session, no mail): the email as at sign-up, a password under the policy
    /// if given (else the user signs in after a password reset), verified and disabled as asked.
    public func adminCreateUser(_ request: AdminCreateUserRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AdminUser {
        let actor = try Self.adminActor(request.actor)
        let email = try EmailAddress(request.email)
        let displayName = try IdentityInput.validDisplayName(request.displayName)
        var hash: String?
        if let typed = request.password {
            hash = try await passwords.hasher.hash(try passwords.policy.validate(typed, email: email.normalized), deadline: IdentityInput.hashDeadline(deadline))
        }
        if try await store.user(normalizedEmail: email.normalized) != nil { throw IdentityError.emailExists }
        let user = UserRecord(
            id: .random(), email: email, emailVerified: request.emailVerified, displayName: displayName, passwordHash: hash,
            disabled: request.disabled, settingsJSON: defaultSettingsJSON, createdAt: clock.now)
        try await audited(AuditEvent.Kind.userCreated, actor: actor, userID: user.id.rawValue, email: email.normalized, client: request.client) {
            try await store.insert(user)
        }
        await publish(IdentityAPI.Topic.userCreated, user)
        return AdminUser(user)
    }

    /// Changes what the request gives. A new email is applied at once (no mail; unverified unless
    /// `emailVerified` says so); a new password or a disable revokes every session before and
    /// after the write (a sign-in racing it is caught), and voids password reset codes.
    public func adminUpdateUser(_ request: AdminUpdateUserRequest, deadline: ContinuousClock.Instant? = nil) async throws -> AdminUser {
        let actor = try Self.adminActor(request.actor)
        let id = try IdentityInput.validID(request.userID)
        let email = try request.email.map { try EmailAddress($0) }
        let displayName = try request.displayName.map { try IdentityInput.validDisplayName($0) ?? "" }
        guard let current = try await store.user(id: id) else { throw IdentityError.userNotFound }
        if current.isAnonymous, email != nil || request.password != nil {
            throw IdentityError.invalidArgument(field: "email", reason: "an anonymous user gets an email and password by upgrading (POST /v1/me/upgrade)")
        }
        let normalized = email?.normalized ?? current.emailNormalized ?? ""
        var newHash: String?
        if let typed = request.password {
            newHash = try await passwords.hasher.hash(try passwords.policy.validate(typed, email: normalized), deadline: IdentityInput.hashDeadline(deadline))
        }
        let hash = newHash
        if let email, email.normalized != current.emailNormalized, try await store.user(normalizedEmail: email.normalized) != nil {
            throw IdentityError.emailExists
        }
        var fields: [String] = []
        if email != nil { fields.append("email") }
        if displayName != nil { fields.append("displayName") }
        if request.disabled != nil { fields.append("disabled") }
        if request.emailVerified != nil { fields.append("emailVerified") }
        if hash != nil { fields.append("password") }
        let kind = fields == ["disabled"]
            ? (request.disabled == true ? AuditEvent.Kind.userDisabled : AuditEvent.Kind.userEnabled) : AuditEvent.Kind.userUpdated
        var detail = JSONObjectWriter()
        detail.strings("fields", fields)
        let detailJSON = String(decoding: detail.finish(), as: UTF8.self)
        guard !fields.isEmpty else {
            throw IdentityError.invalidArgument(field: "user", reason: "nothing to change: give email, displayName, disabled, emailVerified or password")
        }
        let write = { [clock] () async throws -> UserRecord in
            try await self.audited(kind, actor: actor, userID: id.rawValue, email: email?.normalized ?? "", client: request.client) {
                AuditScope.current?.update { $0.detailJSON = detailJSON }
                // A new address or password voids the user's reset codes and pending email changes
                // and verifications in the same transaction: a code mailed before must not undo it.
                let voids = email.map { $0.normalized != current.emailNormalized } == true || hash != nil
                return try await store.update(id: id, now: clock.now, voidingCodes: voids) { user in
                    if let email {
                        user.email = email.typed
                        user.emailNormalized = email.normalized
                        if email.normalized != current.emailNormalized { user.emailVerified = false }
                    }
                    if let displayName { user.displayName = displayName.isEmpty ? nil : displayName }
                    if let disabled = request.disabled { user.disabled = disabled }
                    if let verified = request.emailVerified { user.emailVerified = verified }
                    if let hash { user.passwordHash = hash }
                }
            }
        }
        let user: UserRecord
        if hash != nil || request.disabled == true {
            user = try await revokingSessions(of: id, reason: hash != nil ? "password_changed" : "user_disabled") { try await write() }.0
        } else {
            user = try await write()
        }
        await publish(user.disabled && !current.disabled ? IdentityAPI.Topic.userDisabled : IdentityAPI.Topic.userUpdated, user)
        return AdminUser(user)
    }

    /// Deletes a user as `identity.deleteUser` does, audited with the request's actor.
    public func adminDeleteUser(_ request: AdminUserRequest) async throws -> Empty {
        let actor = try Self.adminActor(request.actor)
        let id = try IdentityInput.validID(request.userID)
        return try await audited(AuditEvent.Kind.userDeleted, actor: actor, userID: id.rawValue, client: request.client) {
            try await deleteUserAudited(id)
        }
    }

    /// Sets a user's custom claims as `identity.setCustomClaims` does, audited with the actor.
    public func adminSetClaims(_ request: AdminSetClaimsRequest) async throws -> AdminUser {
        let actor = try Self.adminActor(request.actor)
        let id = try IdentityInput.validID(request.userID)
        let claims = try CustomClaims.validated(request.claimsJSON)
        let user = try await audited(AuditEvent.Kind.claimsSet, actor: actor, userID: id.rawValue, client: request.client) {
            try await store.update(id: id, expectedVersion: nil, now: clock.now) { $0.customClaimsJSON = claims }
        }
        await publish(IdentityAPI.Topic.userUpdated, user)
        return AdminUser(user)
    }

    /// Revokes every session of a user (reason `admin_revoked`, committed in the token service).
    public func revokeUserSessions(_ request: AdminUserRequest) async throws -> RevokedCount {
        let actor = try Self.adminActor(request.actor)
        let id = try IdentityInput.validID(request.userID)
        guard try await store.user(id: id) != nil else { throw IdentityError.userNotFound }
        return try await audited(AuditEvent.Kind.userSessionsRevoked, actor: actor, userID: id.rawValue, client: request.client) {
            try await tokens.call(TokenAPI.revokeAllSessions, UserSessionsRequest(userID: id.rawValue, reason: "admin_revoked"))
        }
    }

    /// Stores a password-reset or verification code for the user and answers its link, without
    /// a mail: the operator hands it over. Older codes of the kind are voided.
    public func generateActionLink(_ request: GenerateActionLinkRequest) async throws -> ActionLink {
        let actor = try Self.adminActor(request.actor)
        let id = try IdentityInput.validID(request.userID)
        guard let kind = LinkCodeKind(rawValue: request.kind) else {
            throw IdentityError.invalidArgument(field: "kind", reason: "must be password_reset or verify_email")
        }
        guard let user = try await store.user(id: id) else { throw IdentityError.userNotFound }
        guard !user.isAnonymous, let typed = user.email, let normalized = user.emailNormalized else {
            throw IdentityError.invalidArgument(field: "userID", reason: "an anonymous user has no email address to act on")
        }
        guard !user.disabled else { throw IdentityError.userDisabled }
        if kind == .verifyEmail, user.emailVerified { throw IdentityError.emailAlreadyVerified }
        let ttl = kind == .passwordReset ? mail.passwordReset.ttl : mail.emailFlows.verificationTTL
        let code = IdentityInput.newResetCode()
        let now = clock.now
        try await audited(AuditEvent.Kind.actionLinkGenerated, actor: actor, userID: id.rawValue, email: normalized, client: request.client) {
            AuditScope.current?.update { $0.detailJSON = #"{"kind":"\#(kind.rawValue)"}"# }
            try await store.storeLinkCode(
                kind, userID: id, email: typed, emailNormalized: normalized, codeHash: IdentityInput.resetCodeHash(code),
                expiresAt: now.addingTimeInterval(ttl), now: now)
        }
        let link = mail.composer.link(kind == .passwordReset ? .passwordReset : .verifyEmail, code: code, locale: "en") ?? ""
        return ActionLink(link: link, code: code, expiresIn: Int64(ttl.rounded(.up)))
    }
}

extension AdminUser {
    /// The admin view of `record`.
    public init(_ record: UserRecord) {
        self.init(user: User(record), customClaimsJSON: record.customClaimsJSON, updatedAt: record.updatedAt)
    }
}
