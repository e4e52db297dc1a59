import Foundation
import GatehouseContracts
import GatehouseSupport
import HTTPTypes
import Hummingbird

/// Email verification (issue 19 §3): the signed-in user asks for a verification mail
/// (`POST /v1/me/email-verification`), anyone asks for one by address without revealing whether
/// it has an account (`POST /v1/email-verification`: how a user blocked by
/// `GATEHOUSE_EMAIL_VERIFICATION=required` gets a new mail), and the mailed code verifies the
/// address (`POST /v1/email-verification/confirm`).
extension GatewayRoutes {
    /// `{code}`.
    struct EmailCodeBody: FlatJSONDecodable {
        var code: String

        init?(flat members: [String: String?]) {
            guard let code = members["code"] ?? nil else { return nil }
            self.code = code
        }
    }

    /// `POST /v1/me/email-verification` (bearer, no body): 202 `{email, expiresIn}`, a mail with
    /// a code to the caller's address. 409 `email_already_verified`; 429 `rate_limited` with
    /// `Retry-After` past the per-user mail limits; 422 `invalid_argument` for an anonymous user.
    /// Limited per client address with the other mail-sending requests (`passwordReset` class).
    @Sendable func sendEmailVerification(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let claims = try await authenticate(request)
        let client = try admitClient(.passwordReset, request, context)
        let send = SendEmailVerificationRequest(
            caller: Self.caller(claims), locale: Self.mailLocale(request.headers[.acceptLanguage]), client: client.info)
        let reply = try await call(services.identity, IdentityAPI.sendEmailVerification, send)
        var w = JSONObjectWriter()
        w.string("email", reply.email)
        w.int("expiresIn", Int(reply.expiresIn))
        return Self.json(.accepted, w.finish(), noStore: true)
    }

    /// `POST /v1/email-verification` `{email}`: 202 with no body, the same whether or not the
    /// address has an account or is verified (the identity service does the work after
    /// answering). Limited per client address (`passwordReset` class, shared with password reset).
    @Sendable func requestEmailVerification(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try await requestMailByAddress(request, context) { email, locale, client in
            let ask = EmailVerificationRequest(email: email, locale: locale, client: client)
            _ = try await call(services.identity, IdentityAPI.requestEmailVerification, ask)
        }
    }

    /// `POST /v1/email-verification/confirm` `{code}`: 204; the code's address is verified (access
    /// tokens say `email_verified: true` from their next refresh). 400 `invalid_verification_code`.
    /// Limited per client address like sign-in (a code is a credential).
    @Sendable func confirmEmailVerification(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = try admitClient(.signIn, request, context)
        let body = try await request.jsonBody(EmailCodeBody.self, limit: configuration.maxBodySize)
        guard !body.code.isEmpty, body.code.utf8.count <= 128 else {
            throw GatewayError(.invalidVerificationCode, detail: ErrorTable.entry(.invalidVerificationCode).detail ?? "")
        }
        let confirm = EmailCodeRequest(code: body.code, locale: Self.mailLocale(request.headers[.acceptLanguage]), client: client.info)
        _ = try await call(services.identity, IdentityAPI.confirmEmailVerification, confirm)
        return Response(status: .noContent)
    }
}
