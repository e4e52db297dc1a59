import Foundation
import GatehouseContracts
import GatehouseSupport
import HTTPTypes
import Hummingbird

/// The confirmed email change (issue 19 §4): `PUT /v1/me/email` mails a code to the new address
/// (202, the address unchanged until confirmed); `POST /v1/email-change/confirm` applies it with
/// that code; `POST /v1/email-change/revert` undoes it with the code mailed to the old address,
/// every session of the user refused here before the 204.
extension GatewayRoutes {
    /// `{code}`.
    struct EmailChangeCodeBody: FlatJSONDecodable {
        var code: String

        init?(flat members: [String: String?]) {
            guard let code = members["code"] ?? nil else { return nil }
            self.code = code
        }
    }

    /// `PUT /v1/me/email` `{email}` (recent login required): 202 `{user, pendingEmail,
    /// expiresIn}` when a confirmation mail went to the new address (the user unchanged); 200
    /// with the user when nothing had to be confirmed (the same address, or only its case
    /// changed). The mail's language comes from `Accept-Language`. Limited per address like
    /// sign-up: its `email_exists` tells whether an address has an account, as sign-up's does.
    @Sendable func changeEmail(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let client = try admitClient(.signUp, request, context)
        let body = try await request.jsonBody(EmailBody.self, limit: configuration.maxBodySize)
        try Self.validateEmail(body.email)
        let change = ChangeEmailRequest(
            caller: Self.caller(claims), email: body.email, locale: Self.mailLocale(request.headers[.acceptLanguage]), client: client.info)
        let reply = try await call(services.identity, IdentityAPI.changeEmail, change)
        revocations.insert(reply.revokedSessionIDs, now: clock.now)
        guard let pending = reply.pendingEmail else { return Self.json(.ok, reply.user.publicView, noStore: true) }
        var w = JSONObjectWriter()
        w.raw("user", reply.user.publicView)
        w.string("pendingEmail", pending)
        w.int("expiresIn", Int(reply.pendingExpiresIn ?? 0))
        return Self.json(.accepted, w.finish(), noStore: true)
    }

    /// `POST /v1/email-change/confirm` `{code}`: 204, the user's email is the new address
    /// (verified); the old address gets a notice with a revert code (in the `Accept-Language`
    /// language). Limited per client address like sign-in (a code is a credential).
    @Sendable func confirmEmailChange(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let (code, client, locale) = try await emailChangeCode(request, context)
        let reply = try await call(services.identity, IdentityAPI.confirmEmailChange, EmailCodeRequest(code: code, locale: locale, client: client))
        revocations.insert(reply.revokedSessionIDs, now: clock.now)
        return Self.emailChangeAnswer(.noContent)
    }

    /// `POST /v1/email-change/revert` `{code}`: 204, the old address is back and every session of
    /// the user is revoked (committed before the identity service answered) and refused here
    /// before this answer. Limited per client address like sign-in.
    @Sendable func revertEmailChange(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let (code, client, locale) = try await emailChangeCode(request, context)
        let reply = try await call(services.identity, IdentityAPI.revertEmailChange, EmailCodeRequest(code: code, locale: locale, client: client))
        revocations.insert(reply.revokedSessionIDs, now: clock.now)
        return Self.emailChangeAnswer(.noContent)
    }

    /// The admitted (sign-in class) request's code, checked for length
    /// (`invalid_email_change_code`), with the client and the mail language.
    func emailChangeCode(_ request: Request, _ context: GatewayRequestContext) async throws -> (String, ClientInfo, String) {
        let client = try admitClient(.signIn, request, context)
        let body = try await request.jsonBody(EmailChangeCodeBody.self, limit: configuration.maxBodySize)
        guard !body.code.isEmpty, body.code.utf8.count <= 128 else {
            throw GatewayError(.invalidEmailChangeCode, detail: "The email change code is unknown, expired, already used, or voided by a newer change.")
        }
        return (body.code, client.info, Self.mailLocale(request.headers[.acceptLanguage]))
    }

    /// An empty answer with `Cache-Control: no-store`.
    static func emailChangeAnswer(_ status: HTTPResponse.Status) -> Response {
        var headers = HTTPFields()
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers)
    }
}
