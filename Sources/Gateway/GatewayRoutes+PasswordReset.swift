import Foundation
import GatehouseContracts
import GatehouseSupport
import HTTPTypes
import Hummingbird

/// Password reset (issue 19 §2, scenario A30): `POST /v1/password-reset` answers 202 whether or
/// not the address has an account (the identity service does the work after answering), and
/// `POST /v1/password-reset/confirm` sets the new password with the mailed code, every session of
/// the user refused here before the 204.
extension GatewayRoutes {
    /// `{code, password}`.
    struct ConfirmResetBody: FlatJSONDecodable {
        var code: String
        var password: String

        init?(flat members: [String: String?]) {
            guard let code = members["code"] ?? nil, let password = members["password"] ?? nil else { return nil }
            (self.code, self.password) = (code, password)
        }
    }

    /// `POST /v1/password-reset` `{email}`: 202, nothing else to tell. The mail's language comes
    /// from `Accept-Language` (`ja` or `en`). Limited per client address (`passwordReset`).
    @Sendable func requestPasswordReset(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        try await requestMailByAddress(request, context) { email, locale, client in
            _ = try await call(services.identity, IdentityAPI.requestPasswordReset, PasswordResetRequest(email: email, locale: locale, client: client))
        }
    }

    /// A request by address for a mail (password reset, email verification): limited per client
    /// address (`passwordReset` class), `{email}` checked, the languages of `Accept-Language`
    /// passed on with the client; 202 with no body whatever the address.
    func requestMailByAddress(
        _ request: Request, _ context: GatewayRequestContext, _ send: (String, String, ClientInfo) async throws -> Void
    ) async throws -> Response {
        let client = try admitClient(.passwordReset, request, context)
        let body = try await request.jsonBody(EmailBody.self, limit: configuration.maxBodySize)
        try Self.validateEmail(body.email)
        try await send(body.email, Self.mailLocale(request.headers[.acceptLanguage]), client.info)
        var headers = HTTPFields()
        headers[.cacheControl] = "no-store"
        return Response(status: .accepted, headers: headers)
    }

    /// `POST /v1/password-reset/confirm` `{code, password}`: 204; every session of the user is
    /// revoked. Limited per client address like sign-in (a code is a credential).
    @Sendable func confirmPasswordReset(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        let client = try admitClient(.signIn, request, context)
        let body = try await request.jsonBody(ConfirmResetBody.self, limit: configuration.maxBodySize)
        guard !body.code.isEmpty, body.code.utf8.count <= 128 else {
            throw GatewayError(.invalidResetCode, detail: "The reset code is unknown, expired or already used: ask for a new password reset mail.")
        }
        try Self.validatePassword(body.password)
        return try await withPasswordPlace {
            let confirm = ConfirmPasswordResetRequest(code: body.code, password: body.password, client: client.info)
            let reply = try await call(services.identity, IdentityAPI.confirmPasswordReset, confirm)
            revocations.insert(reply.revokedSessionIDs, now: clock.now)
            return Response(status: .noContent)
        }
    }

    /// The languages of `Accept-Language`, best first (by q-value, then order), as primary
    /// subtags joined by commas (`ja-JP,ja;q=0.9,en;q=0.8` → `ja,en`), at most 8 and 64 bytes;
    /// `en` when none is usable. The identity service mails in the first one it has templates for.
    public static func mailLocale(_ header: String?) -> String {
        guard let header else { return "en" }
        var ranked: [(tag: String, q: Double, index: Int)] = []
        for (index, item) in header.split(separator: ",").prefix(32).enumerated() {
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let tag = parts.first?.lowercased() else { continue }
            let primary = String(tag.split(separator: "-").first ?? "")
            guard (1...8).contains(primary.utf8.count), primary.utf8.allSatisfy({ $0 >= 0x61 && $0 <= 0x7A }) else { continue }
            var q = 1.0
            for parameter in parts.dropFirst() where parameter.lowercased().hasPrefix("q=") {
                q = Double(parameter.dropFirst(2)) ?? 0
            }
            guard q > 0, !ranked.contains(where: { $0.tag == primary }) else { continue }
            ranked.append((primary, q, index))
        }
        ranked.sort { $0.q != $1.q ? $0.q > $1.q : $0.index < $1.index }
        var list = ""
        for entry in ranked.prefix(8) where list.utf8.count + entry.tag.utf8.count + 1 <= 64 {
            list += list.isEmpty ? entry.tag : "," + entry.tag
        }
        return list.isEmpty ? "en" : list
    }
}
