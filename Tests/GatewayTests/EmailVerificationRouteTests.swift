import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseTestSupport
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IdentityService
import JWTKit
import Mail
import Testing

@testable import Gateway

/// `POST /v1/me/email-verification`, `POST /v1/email-verification` and
/// `POST /v1/email-verification/confirm`, and the sign-up and sign-in of
/// `GATEHOUSE_EMAIL_VERIFICATION` send and required, over the real services in process (the
/// identity service on a SQLite file, for its outbox).
@Suite("Email verification routes")
struct EmailVerificationRouteTests {
    static let pw = "correct horse battery"

    static func store(_ h: Harness) throws -> SQLiteUserStore { try #require(h.services.identityHandlers.store as? SQLiteUserStore) }

    /// The code of the last verification mail to `to`.
    static func code(_ h: Harness, to: String) async throws -> String {
        let mail = try #require(try await store(h).outboxMails(kind: MailTemplates.Kind.verifyEmail.rawValue).last { $0.to == to })
        return try #require(resetCode(in: mail.text))
    }

    static func accessToken(_ response: TestResponse) throws -> String {
        try #require((try response.object()["session"] as? [String: Any])?["accessToken"] as? String)
    }

    @Test("off: 202 {email, expiresIn} and a mail; the code verifies (204), /v1/me says emailVerified, the refreshed access token says email_verified; the code works once; 409 once verified")
    func sendAndConfirm() async throws {
        try await Harness.run() { h in
            let (_, session) = try await h.signUp("ada@example.com", password: Self.pw)
            #expect(try await Self.store(h).outboxMails(kind: MailTemplates.Kind.verifyEmail.rawValue).isEmpty)
            let access = try #require(session["accessToken"] as? String)
            let refresh = try #require(session["refreshToken"] as? String)
            #expect(try await JWTKeyCollection().unverified(access, as: AccessTokenClaims.self).emailVerified == false)
            let sent = try await h.request(.post, "/v1/me/email-verification", token: access)
            #expect(sent.status == .accepted)
            #expect(sent.headers[.cacheControl] == "no-store")
            #expect(try sent.object()["email"] as? String == "ada@example.com")
            #expect(try sent.object()["expiresIn"] as? Int == 86_400)
            let code = try await Self.code(h, to: "ada@example.com")

            let confirmed = try await h.request(.post, "/v1/email-verification/confirm", json: #"{"code":"\#(code)"}"#)
            #expect(confirmed.status == .noContent)
            let me = try await h.request(.get, "/v1/me", token: access)
            #expect(try me.object()["emailVerified"] as? Bool == true)
            let refreshed = try await h.request(.post, "/v1/sessions/refresh", json: #"{"refreshToken":"\#(refresh)"}"#)
            #expect(refreshed.status == .ok)
            #expect(try await JWTKeyCollection().unverified(try Self.accessToken(refreshed), as: AccessTokenClaims.self).emailVerified == true)
            let again = try await h.request(.post, "/v1/email-verification/confirm", json: #"{"code":"\#(code)"}"#)
            _ = try again.expectProblem(.badRequest, "invalid_verification_code")
            let verified = try await h.request(.post, "/v1/me/email-verification", token: try Self.accessToken(refreshed))
            _ = try verified.expectProblem(.conflict, "email_already_verified")
        }
    }

    @Test("a second mail within a minute: 429 rate_limited with the identity service's Retry-After; no bearer 401; an anonymous user 422 invalid_argument")
    func limitsAndCallers() async throws {
        try await Harness.run() { h in
            let (_, session) = try await h.signUp("bo@example.com", password: Self.pw)
            let access = try #require(session["accessToken"] as? String)
            #expect(try await h.request(.post, "/v1/me/email-verification", token: access).status == .accepted)
            h.clock.advance(by: 15)
            let limited = try await h.request(.post, "/v1/me/email-verification", token: access)
            _ = try limited.expectProblem(.tooManyRequests, "rate_limited")
            #expect(limited.headers[.retryAfter] == "45")
            _ = try await h.request(.post, "/v1/me/email-verification").expectProblem(.unauthorized, "unauthenticated")
            let anonymous = try await h.request(.post, "/v1/accounts/anonymous")
            let anonymousAccess = try Self.accessToken(anonymous)
            _ = try await h.request(.post, "/v1/me/email-verification", token: anonymousAccess).expectProblem(.unprocessableContent, "invalid_argument")
            #expect(try await Self.store(h).outboxMails(kind: MailTemplates.Kind.verifyEmail.rawValue).count == 1)
        }
    }

    @Test("by address: 202 with no body for known and unknown addresses alike, a mail only for the unverified account, in the Accept-Language; bad input 422/400")
    func byAddress() async throws {
        try await Harness.run() { h in
            _ = try await h.signUp("kana@example.com", password: Self.pw)
            var headers = HTTPFields()
            headers[.acceptLanguage] = "ja-JP,ja;q=0.9,en;q=0.5"
            let known = try await h.request(.post, "/v1/email-verification", json: #"{"email":"kana@example.com"}"#, headers: headers)
            let unknown = try await h.request(.post, "/v1/email-verification", json: #"{"email":"nobody@example.com"}"#)
            for r in [known, unknown] {
                #expect(r.status == .accepted)
                #expect(r.text.isEmpty)
                #expect(r.headers[.cacheControl] == "no-store")
            }
            let store = try Self.store(h)
            try await waitUntil("the verification mail is queued") { try await store.outboxMails(kind: MailTemplates.Kind.verifyEmail.rawValue).count == 1 }
            #expect(try await store.outboxMails(kind: MailTemplates.Kind.verifyEmail.rawValue).first?.subject == "Gatehouse メールアドレスの確認")
            _ = try await h.request(.post, "/v1/email-verification", json: #"{"email":"not an email"}"#)
                .expectProblem(.unprocessableContent, "invalid_email")
            _ = try await h.request(.post, "/v1/email-verification", json: #"{}"#).expectProblem(.badRequest, "malformed_request")
            for bad in ["", "nope", String(repeating: "a", count: 200)] {
                _ = try await h.request(.post, "/v1/email-verification/confirm", json: #"{"code":"\#(bad)"}"#)
                    .expectProblem(.badRequest, "invalid_verification_code")
            }
            _ = try await h.request(.post, "/v1/email-verification/confirm", json: #"{}"#).expectProblem(.badRequest, "malformed_request")
        }
    }

    @Test("by address is limited per client address with password reset (passwordReset class)")
    func sharedRateLimit() async throws {
        let limits = RateLimits(limits: [.passwordReset: RateLimit(perSecond: 10.0 / 3600, burst: 2)], maxClients: 1000)
        try await Harness.run(.live, configure: { $0.rateLimits = limits }) { h in
            #expect(try await h.request(.post, "/v1/password-reset", json: #"{"email":"x@example.com"}"#).status == .accepted)
            #expect(try await h.request(.post, "/v1/email-verification", json: #"{"email":"x@example.com"}"#).status == .accepted)
            let refused = try await h.request(.post, "/v1/email-verification", json: #"{"email":"x@example.com"}"#)
            _ = try refused.expectProblem(.tooManyRequests, "rate_limited")
            #expect(refused.headers[.retryAfter] != nil)
        }
    }

    @Test("send: sign-up answers 201 {user, session} and mails a verification")
    func sendMode() async throws {
        try await Harness.run(emailVerification: .send) { h in
            let (user, session) = try await h.signUp("cy@example.com", password: Self.pw)
            #expect(user["emailVerified"] as? Bool == false)
            #expect(session["accessToken"] is String)
            #expect(try await Self.store(h).outboxMails(kind: MailTemplates.Kind.verifyEmail.rawValue).map(\.to) == ["cy@example.com"])
        }
    }

    @Test("required: sign-up answers 201 {user, verificationRequired: true} without a session; sign-in 403 email_not_verified only with the right password; after the mailed code, sign-in 200 with email_verified in the token")
    func requiredMode() async throws {
        try await Harness.run(emailVerification: .required) { h in
            let signedUp = try await h.request(.post, "/v1/accounts", json: #"{"email":"di@example.com","password":"\#(Self.pw)"}"#)
            #expect(signedUp.status == .created)
            #expect(signedUp.headers[.cacheControl] == "no-store")
            let body = try signedUp.object()
            #expect(body["verificationRequired"] as? Bool == true)
            #expect(body["session"] == nil)
            #expect((body["user"] as? [String: Any])?["email"] as? String == "di@example.com")
            let wrong = try await h.request(.post, "/v1/sessions", json: #"{"email":"di@example.com","password":"not the password"}"#)
            _ = try wrong.expectProblem(.unauthorized, "invalid_credentials")
            let blocked = try await h.request(.post, "/v1/sessions", json: #"{"email":"di@example.com","password":"\#(Self.pw)"}"#)
            _ = try blocked.expectProblem(.forbidden, "email_not_verified")
            let code = try await Self.code(h, to: "di@example.com")
            #expect(try await h.request(.post, "/v1/email-verification/confirm", json: #"{"code":"\#(code)"}"#).status == .noContent)
            let signedIn = try await h.request(.post, "/v1/sessions", json: #"{"email":"di@example.com","password":"\#(Self.pw)"}"#)
            #expect(signedIn.status == .ok)
            #expect(try await JWTKeyCollection().unverified(try Self.accessToken(signedIn), as: AccessTokenClaims.self).emailVerified == true)
        }
    }
}
