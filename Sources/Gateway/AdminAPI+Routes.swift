import Foundation
import GatehouseContracts
import GatehouseSupport
import Hummingbird
import HTTPTypes
import NIOCore

// The admin listener's handlers (issue 22 §1). Every route checks the key and one scope first,
// then validates its input, then makes its calls; each writing call carries the key as the
// audit actor.
extension AdminRoutes {
    struct CreateUserBody: Decodable {
        var email: String
        var password: String?
        var emailVerified: Bool?
        var displayName: String?
        var disabled: Bool?
    }

    struct UpdateUserBody: Decodable {
        var email: String?
        var displayName: String?
        var disabled: Bool?
        var emailVerified: Bool?
        var password: String?
    }

    struct LinkBody: Decodable {
        var kind: String
    }

    /// `GET /admin/v1/users?emailPrefix&provider&disabled&anonymous&createdAfter&createdBefore&limit&cursor` (users:read).
    @Sendable func listUsers(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        _ = try await authorize(request, AdminKey.Scope.usersRead)
        let query = request.uri.queryParameters
        var list = ListUsersRequest()
        list.emailPrefix = query.get("emailPrefix") ?? ""
        list.provider = query.get("provider") ?? ""
        list.disabled = try Self.bool(query.get("disabled"), "disabled")
        list.anonymous = try Self.bool(query.get("anonymous"), "anonymous")
        list.createdAfter = try Self.date(query.get("createdAfter"), "createdAfter")
        list.createdBefore = try Self.date(query.get("createdBefore"), "createdBefore")
        if let text = query.get("limit") {
            guard let limit = Int32(text), (1...maxUsersPage).contains(limit) else {
                throw GatewayError.invalidArgument("`limit` must be a whole number from 1 to \(maxUsersPage).")
            }
            list.limit = limit
        }
        list.cursor = query.get("cursor") ?? ""
        let page = try await call(identity, IdentityAPI.listUsers, list)
        var w = JSONObjectWriter()
        w.rawArray("users", page.users.map(\.adminView))
        w.string("nextCursor", page.nextCursor.isEmpty ? nil : page.nextCursor)
        return Self.json(.ok, w.finish())
    }

    /// `POST /admin/v1/users` (users:write): 201 with the user.
    @Sendable func createUser(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let actor = try await authorize(request, AdminKey.Scope.usersWrite)
        let body = try await request.jsonBody(CreateUserBody.self, limit: configuration.maxBodySize)
        try GatewayRoutes.validateEmail(body.email)
        if let password = body.password { try GatewayRoutes.validatePassword(password) }
        let create = AdminCreateUserRequest(
            email: body.email, password: body.password, emailVerified: body.emailVerified ?? false, displayName: body.displayName,
            disabled: body.disabled ?? false, actor: actor, client: Self.client(request, context))
        return Self.json(.created, try await call(identity, IdentityAPI.adminCreateUser, create).adminView)
    }

    /// `GET /admin/v1/users/{id}` (users:read).
    @Sendable func getUser(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        _ = try await authorize(request, AdminKey.Scope.usersRead)
        let user = try await call(identity, IdentityAPI.adminGetUser, AdminUserRequest(userID: try Self.userID(context)))
        return Self.json(.ok, user.adminView)
    }

    /// `PATCH /admin/v1/users/{id}` (users:write): each field given is set.
    @Sendable func updateUser(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let actor = try await authorize(request, AdminKey.Scope.usersWrite)
        let id = try Self.userID(context)
        let body = try await request.jsonBody(UpdateUserBody.self, limit: configuration.maxBodySize)
        if let email = body.email { try GatewayRoutes.validateEmail(email) }
        if let password = body.password { try GatewayRoutes.validatePassword(password) }
        let update = AdminUpdateUserRequest(
            userID: id, email: body.email, displayName: body.displayName, disabled: body.disabled, emailVerified: body.emailVerified,
            password: body.password, actor: actor, client: Self.client(request, context))
        return Self.json(.ok, try await call(identity, IdentityAPI.adminUpdateUser, update).adminView)
    }

    /// `DELETE /admin/v1/users/{id}` (users:write): 204 once the user and its sessions are gone.
    @Sendable func deleteUser(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let actor = try await authorize(request, AdminKey.Scope.usersWrite)
        _ = try await call(identity, IdentityAPI.adminDeleteUser, AdminUserRequest(userID: try Self.userID(context), actor: actor, client: Self.client(request, context)))
        return Response(status: .noContent)
    }

    /// `GET /admin/v1/users/{id}/sessions` (sessions): every session, ended ones included.
    @Sendable func listSessions(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        _ = try await authorize(request, AdminKey.Scope.sessions)
        let id = try Self.userID(context)
        _ = try await call(identity, IdentityAPI.adminGetUser, AdminUserRequest(userID: id))  // 404 for an unknown user
        let list = try await call(tokens, TokenAPI.listSessions, UserSessionsRequest(userID: id))
        var w = JSONObjectWriter()
        w.rawArray("sessions", list.sessions.map(\.adminJSON))
        return Self.json(.ok, w.finish())
    }

    /// `DELETE /admin/v1/users/{id}/sessions` (sessions): `{revoked, sessionIds}` once committed.
    @Sendable func revokeSessions(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let actor = try await authorize(request, AdminKey.Scope.sessions)
        let revoked = try await call(identity, IdentityAPI.revokeUserSessions, AdminUserRequest(userID: try Self.userID(context), actor: actor, client: Self.client(request, context)))
        var w = JSONObjectWriter()
        w.int("revoked", Int(revoked.count))
        w.strings("sessionIds", revoked.sessionIDs)
        return Self.json(.ok, w.finish())
    }

    /// `PUT /admin/v1/users/{id}/claims` (claims): the body is the claims object itself.
    @Sendable func setClaims(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let actor = try await authorize(request, AdminKey.Scope.claims)
        let id = try Self.userID(context)
        guard let type = request.headers[.contentType], Request.isJSON(type) else { throw GatewayError.unsupportedMediaType }
        let buffer: ByteBuffer
        do { buffer = try await request.body.collect(upTo: 4096) } catch is NIOTooManyBytesError { throw GatewayError.payloadTooLarge(4096) }
        let claims = String(decoding: buffer.readableBytesView, as: UTF8.self)
        let user = try await call(identity, IdentityAPI.adminSetClaims, AdminSetClaimsRequest(
            userID: id, claimsJSON: claims, actor: actor, client: Self.client(request, context)))
        return Self.json(.ok, user.adminView)
    }

    /// `POST /admin/v1/users/{id}/links` `{kind: passwordReset|verifyEmail}` (users:write): 201
    /// `{link, code, expiresIn}`, stored but not mailed.
    @Sendable func generateLink(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let actor = try await authorize(request, AdminKey.Scope.usersWrite)
        let id = try Self.userID(context)
        let body = try await request.jsonBody(LinkBody.self, limit: configuration.maxBodySize)
        let kinds = ["passwordReset": "password_reset", "verifyEmail": "verify_email"]
        guard let kind = kinds[body.kind] else { throw GatewayError.invalidArgument("`kind` must be passwordReset or verifyEmail.") }
        let link = try await call(identity, IdentityAPI.generateActionLink, GenerateActionLinkRequest(
            userID: id, kind: kind, actor: actor, client: Self.client(request, context)))
        var w = JSONObjectWriter()
        w.string("link", link.link.isEmpty ? nil : link.link)
        w.string("code", link.code)
        w.int("expiresIn", Int(link.expiresIn))
        return Self.json(.created, w.finish())
    }

    /// The admin client for the audit log: its address (the TCP peer: the listener trusts no
    /// forwarding header) and user agent (at most 512 bytes).
    static func client(_ request: Request, _ context: GatewayRequestContext) -> ClientInfo {
        ClientInfo(userAgent: (request.headers[.userAgent] ?? "").truncated(toUTF8Bytes: 512), ip: context.peerIP ?? "")
    }

    // MARK: Query values

    static func bool(_ text: String?, _ name: String) throws -> Bool? {
        switch text {
        case nil: return nil
        case "true": return true
        case "false": return false
        default: throw GatewayError.invalidArgument("`\(name)` must be true or false.")
        }
    }

    static func date(_ text: String?, _ name: String) throws -> Date? {
        guard let text else { return nil }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        throw GatewayError.invalidArgument("`\(name)` must be an RFC 3339 time, e.g. 2026-01-31T12:00:00Z.")
    }
}
