import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IdentityService
import Mail
import Testing

@testable import Gateway

/// `POST /v1/password-reset` and `POST /v1/password-reset/confirm` over the real services in
/// process (the identity service on a SQLite file, for its outbox).
@Suite("Password reset routes")
struct PasswordResetRouteTests {
    static let pw = "correct horse battery"
    static let newPW = "saffron kettle obelisk"

    static func store(_ h: Harness) throws -> SQLiteUserStore { try #require(h.services.identityHandlers.store as? SQLiteUserStore) }

    /// The code in a mail's text: the line of 43 base64url characters.
    static func code(in text: String) -> String? {
        text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first { line in
            line.utf8.count == 43 && line.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" }
        }
    }

    @Test("A30 at the gateway: 202 for known and unknown emails alike; the mailed code sets the password, old sessions are refused at once, the code works once")
    func requestAndConfirm() async throws {
        try await Harness.run() { h in
            let (_, session) = try await h.signUp("ada@example.com", password: Self.pw)
            let access = try #require(session["accessToken"] as? String)
            let known = try await h.request(.post, "/v1/password-reset", json: #"{"email":"ada@example.com"}"#)
            let unknown = try await h.request(.post, "/v1/password-reset", json: #"{"email":"nobody@example.com"}"#)
            for r in [known, unknown] {
                #expect(r.status == .accepted)
                #expect(r.text.isEmpty)
                #expect(r.headers[.cacheControl] == "no-store")
            }
            let store = try Self.store(h)
            try await waitUntil("the reset mail is queued") { try await store.outboxMails(kind: MailTemplates.Kind.passwordReset.rawValue).count == 1 }
            let mail = try #require(try await store.outboxMails(kind: MailTemplates.Kind.passwordReset.rawValue).first)
            #expect(mail.to == "ada@example.com" && mail.subject == "Reset your Gatehouse password")
            let code = try #require(Self.code(in: mail.text))

            let weak = try await h.request(.post, "/v1/password-reset/confirm", json: #"{"code":"\#(code)","password":"short"}"#)
            _ = try weak.expectProblem(.unprocessableContent, "weak_password")
            let done = try await h.request(.post, "/v1/password-reset/confirm", json: #"{"code":"\#(code)","password":"\#(Self.newPW)"}"#)
            #expect(done.status == .noContent)
            #expect(try await h.request(.get, "/v1/me", token: access).status == .unauthorized)
            let old = try await h.request(.post, "/v1/sessions", json: #"{"email":"ada@example.com","password":"\#(Self.pw)"}"#)
            _ = try old.expectProblem(.unauthorized, "invalid_credentials")
            let new = try await h.request(.post, "/v1/sessions", json: #"{"email":"ada@example.com","password":"\#(Self.newPW)"}"#)
            #expect(new.status == .ok)
            let again = try await h.request(.post, "/v1/password-reset/confirm", json: #"{"code":"\#(code)","password":"another fine passphrase"}"#)
            _ = try again.expectProblem(.badRequest, "invalid_reset_code")
        }
    }

    @Test("Accept-Language ja gives the Japanese mail; en, other languages or none give English")
    func language() async throws {
        #expect(GatewayRoutes.mailLocale("ja") == "ja")
        #expect(GatewayRoutes.mailLocale("ja-JP,ja;q=0.9,en;q=0.8") == "ja,en")
        #expect(GatewayRoutes.mailLocale("en-US,en;q=0.9,ja;q=0.8") == "en,ja")
        #expect(GatewayRoutes.mailLocale("fr-FR, ja;q=0.5") == "fr,ja")
        #expect(GatewayRoutes.mailLocale("ja;q=0.5, fr-FR") == "fr,ja")
        #expect(GatewayRoutes.mailLocale("fr-FR") == "fr")
        #expect(GatewayRoutes.mailLocale("*, x-klingon, 12") == "x")
        #expect(GatewayRoutes.mailLocale("ja;q=0") == "en")
        #expect(GatewayRoutes.mailLocale(nil) == "en")
        try await Harness.run() { h in
            _ = try await h.signUp("kana@example.com", password: Self.pw)
            var headers = HTTPFields()
            headers[.acceptLanguage] = "ja-JP,ja;q=0.9,en;q=0.5"
            let r = try await h.request(.post, "/v1/password-reset", json: #"{"email":"kana@example.com"}"#, headers: headers)
            #expect(r.status == .accepted)
            let store = try Self.store(h)
            try await waitUntil("the reset mail is queued") { try await store.outboxMails(kind: MailTemplates.Kind.passwordReset.rawValue).count == 1 }
            #expect(try await store.outboxMails(kind: MailTemplates.Kind.passwordReset.rawValue).first?.subject == "Gatehouse のパスワード再設定")
        }
    }

    @Test("bad input: malformed email 422 invalid_email, no email 400, bad or empty code 400 invalid_reset_code, no password 400")
    func badInput() async throws {
        try await Harness.run() { h in
            _ = try await h.request(.post, "/v1/password-reset", json: #"{"email":"not an email"}"#)
                .expectProblem(.unprocessableContent, "invalid_email")
            _ = try await h.request(.post, "/v1/password-reset", json: #"{}"#).expectProblem(.badRequest, "malformed_request")
            _ = try await h.request(.post, "/v1/password-reset/confirm", json: #"{"code":"nope","password":"\#(Self.newPW)"}"#)
                .expectProblem(.badRequest, "invalid_reset_code")
            _ = try await h.request(.post, "/v1/password-reset/confirm", json: #"{"code":"","password":"\#(Self.newPW)"}"#)
                .expectProblem(.badRequest, "invalid_reset_code")
            let long = String(repeating: "a", count: 200)
            _ = try await h.request(.post, "/v1/password-reset/confirm", json: #"{"code":"\#(long)","password":"\#(Self.newPW)"}"#)
                .expectProblem(.badRequest, "invalid_reset_code")
            _ = try await h.request(.post, "/v1/password-reset/confirm", json: #"{"code":"abc"}"#).expectProblem(.badRequest, "malformed_request")
            #expect(try await Self.store(h).outboxMails(kind: MailTemplates.Kind.passwordReset.rawValue).isEmpty)
        }
    }

    @Test("requests are limited per client address (passwordReset class): 429 rate_limited with Retry-After")
    func rateLimited() async throws {
        let limits = RateLimits(limits: [.passwordReset: RateLimit(perSecond: 10.0 / 3600, burst: 2)], maxClients: 1000)
        try await Harness.run(.live, configure: { $0.rateLimits = limits }) { h in
            let body = #"{"email":"someone@example.com"}"#
            #expect(try await h.request(.post, "/v1/password-reset", json: body).status == .accepted)
            #expect(try await h.request(.post, "/v1/password-reset", json: body).status == .accepted)
            let refused = try await h.request(.post, "/v1/password-reset", json: body)
            _ = try refused.expectProblem(.tooManyRequests, "rate_limited")
            #expect(refused.headers[.retryAfter] != nil)
            #expect(RateLimits.defaults.limits[.passwordReset] == RateLimit(perSecond: 10.0 / 3600, burst: 5))
        }
    }
}
