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

/// The confirmed email change (issue 19 §4): `PUT /v1/me/email`, `POST /v1/email-change/confirm`
/// and `POST /v1/email-change/revert` over the real services in process (the identity service on
/// a SQLite file, for its codes and outbox).
@Suite("Email change routes")
struct EmailChangeRouteTests {
    static let pw = "correct horse battery"

    static func store(_ h: Harness) throws -> SQLiteUserStore { try #require(h.services.identityHandlers.store as? SQLiteUserStore) }

    /// The mails of `kind` in the outbox, oldest first.
    static func mails(_ h: Harness, _ kind: String) async throws -> [(to: String, subject: String, text: String)] {
        try await store(h).outboxEntries().map(\.message).filter { $0.kind == kind }.map { ($0.to, $0.subject, $0.text) }
    }

    /// The code of the last mail of `kind`.
    static func code(_ h: Harness, _ kind: String) async throws -> String {
        let text = try await mails(h, kind).last?.text ?? ""
        return try #require(resetCode(in: text))
    }

    func access(_ session: [String: Any]) -> String { session["accessToken"] as? String ?? "" }

    func codeBody(_ code: String) -> String { #"{"code":"\#(code)"}"# }

    @Test("A28 at the gateway: 202 {user, pendingEmail, expiresIn}, the address unchanged; the mailed code confirms it (204, verified); the notice's code reverts it (204) and every token of the user is refused at once")
    func changeConfirmRevert() async throws {
        try await Harness.run() { h in
            let (_, session) = try await h.signUp("e@example.com", password: Self.pw)
            let other = try #require(try await h.request(.post, "/v1/sessions", json: #"{"email":"e@example.com","password":"\#(Self.pw)"}"#)
                .object()["session"] as? [String: Any])
            let pending = try await h.request(.put, "/v1/me/email", json: #"{"email":"New@Example.com"}"#, token: access(session))
            #expect(pending.status == .accepted)
            #expect(pending.headers[.cacheControl] == "no-store")
            let body = try pending.object()
            #expect(body["pendingEmail"] as? String == "New@Example.com" && body["expiresIn"] as? Int == 3600)
            #expect((body["user"] as? [String: Any])?["email"] as? String == "e@example.com")
            #expect(try await h.request(.get, "/v1/me", token: access(session)).object()["email"] as? String == "e@example.com")
            let mail = try #require(try await Self.mails(h, "change_email").first)
            #expect(mail.to == "New@Example.com")

            let confirmed = try await h.request(.post, "/v1/email-change/confirm", json: codeBody(try await Self.code(h, "change_email")))
            #expect(confirmed.status == .noContent && confirmed.headers[.cacheControl] == "no-store")
            let me = try await h.request(.get, "/v1/me", token: access(session)).object()
            #expect(me["email"] as? String == "New@Example.com" && me["emailVerified"] as? Bool == true)
            #expect(try await h.request(.post, "/v1/sessions", json: #"{"email":"new@example.com","password":"\#(Self.pw)"}"#).status == .ok)
            let notice = try #require(try await Self.mails(h, "email_changed").first)
            #expect(notice.to == "e@example.com")

            // Without the revocation feed: the gateway refuses the tokens from the identity service's reply.
            h.services.dropEvents(true)
            let reverted = try await h.request(.post, "/v1/email-change/revert", json: codeBody(try await Self.code(h, "email_changed")))
            #expect(reverted.status == .noContent)
            for token in [access(session), access(other)] {
                #expect(try await h.request(.get, "/v1/me", token: token).status == .unauthorized)
            }
            try await h.request(.post, "/v1/email-change/revert", json: codeBody(try await Self.code(h, "email_changed")))
                .expectProblem(.badRequest, "invalid_email_change_code")
            // The password ended with the revert; a reset mail went to the restored address.
            #expect(try await h.request(.post, "/v1/sessions", json: #"{"email":"e@example.com","password":"\#(Self.pw)"}"#).status == .unauthorized)
            #expect(try await Self.mails(h, "password_reset").last?.to == "e@example.com")
        }
    }

    @Test("A28: invalid_email, email_exists, requires_recent_login when stale; the same address 200 with the user; only its case 200 applied at once")
    func changeEmail() async throws {
        try await Harness.run() { h in
            let (_, session) = try await h.signUp("e@example.com")
            _ = try await h.signUp("taken@example.com")
            try await h.request(.put, "/v1/me/email", json: #"{"email":"not-an-email"}"#, token: access(session))
                .expectProblem(.unprocessableContent, "invalid_email")
            try await h.request(.put, "/v1/me/email", json: #"{"email":"Taken@Example.com"}"#, token: access(session))
                .expectProblem(.conflict, "email_exists")
            try await h.request(.put, "/v1/me/email", json: #"{}"#, token: access(session)).expectProblem(.badRequest, "malformed_request")
            let same = try await h.request(.put, "/v1/me/email", json: #"{"email":"e@example.com"}"#, token: access(session))
            #expect(same.status == .ok)
            #expect(try same.object()["email"] as? String == "e@example.com")
            let cased = try await h.request(.put, "/v1/me/email", json: #"{"email":"E@Example.com"}"#, token: access(session))
            #expect(cased.status == .ok)
            #expect(try cased.object()["email"] as? String == "E@Example.com")
            #expect(try await h.request(.get, "/v1/me", token: access(session)).object()["email"] as? String == "E@Example.com")
            #expect(try await Self.mails(h, "change_email").isEmpty)
            h.clock.advance(by: 301)
            try await h.request(.put, "/v1/me/email", json: #"{"email":"later@example.com"}"#, token: access(session))
                .expectProblem(.forbidden, "requires_recent_login")
        }
    }

    @Test("a second change within a minute: 429 rate_limited with the Retry-After the identity service computed; Accept-Language picks the mail's language")
    func mailLimitAndLanguage() async throws {
        try await Harness.run() { h in
            let (_, session) = try await h.signUp("j@example.com")
            var headers = HTTPFields()
            headers[.acceptLanguage] = "ja-JP,ja;q=0.9"
            let first = try await h.request(.put, "/v1/me/email", json: #"{"email":"j2@example.com"}"#, token: access(session), headers: headers)
            #expect(first.status == .accepted)
            #expect(try await Self.mails(h, "change_email").first?.subject == "Gatehouse 新しいメールアドレスの確認")
            h.clock.advance(by: 15)
            let second = try await h.request(.put, "/v1/me/email", json: #"{"email":"j3@example.com"}"#, token: access(session))
            try second.expectProblem(.tooManyRequests, "rate_limited")
            #expect(second.headers[.retryAfter] == "45")
        }
    }

    @Test("bad codes: empty, too long, unknown 400 invalid_email_change_code; no code 400 malformed_request; taken meanwhile 409 email_exists")
    func badCodes() async throws {
        try await Harness.run() { h in
            for path in ["/v1/email-change/confirm", "/v1/email-change/revert"] {
                for code in ["", String(repeating: "a", count: 200), "nope", String(repeating: "A", count: 43)] {
                    try await h.request(.post, path, json: codeBody(code)).expectProblem(.badRequest, "invalid_email_change_code")
                }
                try await h.request(.post, path, json: "{}").expectProblem(.badRequest, "malformed_request")
            }
            let (_, session) = try await h.signUp("k@example.com")
            #expect(try await h.request(.put, "/v1/me/email", json: #"{"email":"k2@example.com"}"#, token: access(session)).status == .accepted)
            _ = try await h.signUp("k2@example.com")
            try await h.request(.post, "/v1/email-change/confirm", json: codeBody(try await Self.code(h, "change_email")))
                .expectProblem(.conflict, "email_exists")
        }
    }

    @Test("confirm and revert are limited per client address like sign-in")
    func rateLimited() async throws {
        let limits = RateLimits(limits: [.signIn: RateLimit(perSecond: 1.0 / 3600, burst: 1)], maxClients: 1000)
        try await Harness.run(.live, configure: { $0.rateLimits = limits }) { h in
            try await h.request(.post, "/v1/email-change/confirm", json: codeBody("nope")).expectProblem(.badRequest, "invalid_email_change_code")
            try await h.request(.post, "/v1/email-change/revert", json: codeBody("nope")).expectProblem(.tooManyRequests, "rate_limited")
            #expect(h.services.calls(to: IdentityAPI.revertEmailChange) == 0)
        }
    }
}
