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
import NIOCore
import Testing

@testable import Gateway

/// `GET /actions` and `POST /actions` (issue 19 §6) over the real services in process: the
/// headers of every page, a GET that changes nothing, the password reset done through the form,
/// and the rendering and error mapping of the email modes (their identity handlers are answered
/// by hooks here).
@Suite("Action pages")
struct ActionPagesTests {
    static let pw = "correct horse battery"
    static let newPW = "saffron kettle obelisk"
    /// A well-formed code no store knows.
    static let strayCode = "qF3x0Yc1m0uQ2w8ZsVb7Lr9Tn5Kp4Hj6Gd2Ea1Wz0Xy"

    /// Checks the headers every page carries, and returns the HTML.
    @discardableResult
    static func expectPage(_ r: TestResponse, _ status: HTTPResponse.Status, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        #expect(r.status == status, "\(r.text)", sourceLocation: sourceLocation)
        #expect(r.headers[.contentType] == "text/html; charset=utf-8", sourceLocation: sourceLocation)
        let csp = r.headers[.contentSecurityPolicy] ?? ""
        #expect(csp.hasPrefix("default-src 'none'; style-src 'sha256-"), "\(csp)", sourceLocation: sourceLocation)
        #expect(csp.hasSuffix("'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"), "\(csp)", sourceLocation: sourceLocation)
        #expect(r.headers[HTTPField.Name("X-Frame-Options")!] == "DENY", sourceLocation: sourceLocation)
        #expect(r.headers[HTTPField.Name("Referrer-Policy")!] == "no-referrer", sourceLocation: sourceLocation)
        #expect(r.headers[.xContentTypeOptions] == "nosniff", sourceLocation: sourceLocation)
        #expect(r.headers[.cacheControl] == "no-store", sourceLocation: sourceLocation)
        let html = r.text
        #expect(html.hasPrefix("<!doctype html>\n<html lang=\""), sourceLocation: sourceLocation)
        #expect(html.contains("<main>") && html.contains("<h1>"), sourceLocation: sourceLocation)
        #expect(!html.contains("<script"), sourceLocation: sourceLocation)
        return html
    }

    /// Occurrences of `needle` in `text`.
    static func count(_ needle: String, in text: String) -> Int { text.components(separatedBy: needle).count - 1 }

    static func form(_ fields: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-_.*")
        return fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }.joined(separator: "&")
    }

    static func post(_ h: Harness, _ fields: [(String, String)], headers: HTTPFields = [:]) async throws -> TestResponse {
        try await h.request(.post, "/actions", json: form(fields), headers: headers, contentType: "application/x-www-form-urlencoded")
    }

    static func store(_ h: Harness) throws -> SQLiteUserStore { try #require(h.services.identityHandlers.store as? SQLiteUserStore) }

    /// Signs ada up, asks for a reset and returns her access token and the mailed code.
    static func requestReset(_ h: Harness) async throws -> (access: String, code: String) {
        let (_, session) = try await h.signUp("ada@example.com", password: pw)
        #expect(try await h.request(.post, "/v1/password-reset", json: #"{"email":"ada@example.com"}"#).status == .accepted)
        let store = try Self.store(h)
        try await waitUntil("the reset mail is queued") { try await store.outboxMails(kind: MailTemplates.Kind.passwordReset.rawValue).count == 1 }
        let mail = try #require(try await store.outboxMails(kind: MailTemplates.Kind.passwordReset.rawValue).first)
        return (try #require(session["accessToken"] as? String), try #require(resetCode(in: mail.text)))
    }

    @Test("GET renders each mode's form in English and Japanese with the strict headers, the code only in the hidden field, and calls nothing")
    func getRendersForms() async throws {
        try await Harness.run { h in
            for mode in ActionPages.Mode.allCases {
                for lang in ["en", "ja"] {
                    let r = try await h.request(.get, "/actions?mode=\(mode.rawValue)&code=\(Self.strayCode)&lang=\(lang)")
                    let html = Self.expectPage(r, .ok)
                    #expect(html.contains("<html lang=\"\(lang)\">"))
                    #expect(Self.count(Self.strayCode, in: html) == 1)
                    #expect(html.contains(#"<input type="hidden" name="code" value="\#(Self.strayCode)">"#))
                    #expect(html.contains(#"<input type="hidden" name="mode" value="\#(mode.rawValue)">"#))
                    #expect(html.contains(#"<form method="post" action="actions">"#))
                    #expect(html.contains(ActionText.of(lang == "ja" ? .ja : .en).prompt[mode]!.title))
                    let passwords = Self.count(#"autocomplete="new-password""#, in: html)
                    #expect(passwords == (mode == .resetPassword ? 2 : 0))
                    if mode == .resetPassword {
                        #expect(html.contains(#"<label for="password">"#) && html.contains(#"<label for="passwordConfirm">"#))
                        #expect(html.contains(#"id="password" name="password""#) && html.contains(#"id="passwordConfirm" name="passwordConfirm""#))
                    }
                }
            }
            #expect(Self.expectPage(try await h.request(.get, "/actions?mode=verifyEmail&code=\(Self.strayCode)"), .ok).contains(#"lang="en""#))
            var ja = HTTPFields()
            ja[.acceptLanguage] = "fr-FR, ja;q=0.8, en;q=0.5"
            let byHeader = try await h.request(.get, "/actions?mode=verifyEmail&code=\(Self.strayCode)&lang=fr", headers: ja)
            #expect(Self.expectPage(byHeader, .ok).contains(#"<html lang="ja">"#))
            for method in [IdentityAPI.confirmEmailVerification, IdentityAPI.confirmEmailChange, IdentityAPI.revertEmailChange] {
                #expect(h.services.calls(to: method) == 0)
            }
            #expect(h.services.calls(to: IdentityAPI.confirmPasswordReset) == 0)
        }
    }

    @Test("GET with an unknown mode, no code or a malformed code: a 400 page that echoes nothing")
    func getIncomplete() async throws {
        try await Harness.run { h in
            for query in [
                "", "?code=\(Self.strayCode)", "?mode=resetPassword", "?mode=signIn&code=\(Self.strayCode)",
                "?mode=resetPassword&code=%3Cscript%3Ealert(1)%3C%2Fscript%3E", "?mode=verifyEmail&code=" + String(repeating: "a", count: 129),
                "?mode=resetPassword&code=abc%ZZ&lang=%FF",
            ] {
                let html = Self.expectPage(try await h.request(.get, "/actions" + query), .badRequest)
                #expect(html.contains(ActionText.english.incompleteTitle), "\(query)")
                #expect(html.contains(#"<div class="alert" role="alert" id="problem">"#) && html.contains(ActionText.english.incomplete))
                #expect(!html.contains("<form") && !html.contains("alert(1)") && !html.contains(Self.strayCode) && !html.contains("aaaaaaaa"))
            }
        }
    }

    @Test("resetPassword through the form: a GET leaves the code working; mismatch and weak passwords re-show the form (422) without using it; then the password changes, old sessions are refused at once, and the code is spent")
    func resetPassword() async throws {
        try await Harness.run() { h in
            let (access, code) = try await Self.requestReset(h)
            Self.expectPage(try await h.request(.get, "/actions?mode=resetPassword&code=\(code)&lang=en"), .ok)

            let mismatch = try await Self.post(
                h, [("mode", "resetPassword"), ("code", code), ("lang", "en"), ("password", Self.newPW), ("passwordConfirm", Self.newPW + "!")])
            let mismatchHTML = Self.expectPage(mismatch, .unprocessableContent)
            #expect(mismatchHTML.contains(#"role="alert""#) && mismatchHTML.contains(ActionText.english.mismatch))
            #expect(mismatchHTML.contains(#"value="\#(code)""#) && Self.count(code, in: mismatchHTML) == 1)
            #expect(!mismatchHTML.contains(Self.newPW))
            #expect(h.services.calls(to: IdentityAPI.confirmPasswordReset) == 0)

            let empty = try await Self.post(h, [("mode", "resetPassword"), ("code", code), ("lang", "ja")])
            #expect(Self.expectPage(empty, .unprocessableContent).contains(ActionText.japanese.emptyPassword))

            let weak = try await Self.post(
                h, [("mode", "resetPassword"), ("code", code), ("lang", "en"), ("password", "password"), ("passwordConfirm", "password")])
            let weakHTML = Self.expectPage(weak, .unprocessableContent)
            #expect(weakHTML.contains(ActionText.english.weakPassword))
            #expect(weakHTML.contains("<li>It is one of the most common passwords.</li>"), "\(weakHTML)")
            #expect(weakHTML.contains(#"aria-invalid="true""#) && weakHTML.contains("<form"))

            let done = try await Self.post(
                h, [("mode", "resetPassword"), ("code", code), ("lang", "en"), ("password", Self.newPW), ("passwordConfirm", Self.newPW)])
            let doneHTML = Self.expectPage(done, .ok)
            #expect(doneHTML.contains(ActionText.english.done[.resetPassword]!.title))
            #expect(!doneHTML.contains(code) && !doneHTML.contains("<form"))
            #expect(try await h.request(.get, "/v1/me", token: access).status == .unauthorized)
            #expect(try await h.request(.post, "/v1/sessions", json: #"{"email":"ada@example.com","password":"\#(Self.newPW)"}"#).status == .ok)

            let again = try await Self.post(
                h, [("mode", "resetPassword"), ("code", code), ("lang", "ja"), ("password", "another fine passphrase"), ("passwordConfirm", "another fine passphrase")])
            let againHTML = Self.expectPage(again, .badRequest)
            #expect(againHTML.contains(ActionText.japanese.codeRefusedTitle) && againHTML.contains(ActionText.japanese.codeRefused[.resetPassword]!))
            #expect(!againHTML.contains(code))
        }
    }

    @Test("the email modes call their method with the code and the page's language, insert the revoked sessions, and show the address; refused codes, taken addresses, limits and outages map to pages")
    func emailModes() async throws {
        try await Harness.run() { h in
            let access = try #require(try await h.signUp().session["accessToken"] as? String)
            let sid = try await JWTKeyCollection().unverified(access, as: AccessTokenClaims.self).sid
            let user = User(id: "u1", email: "ada@example.org", emailVerified: true, createdAt: Date(timeIntervalSince1970: 1_700_000_000))
            let methods: [(ActionPages.Mode, RPCMethod<EmailCodeRequest, EmailCodeResponse>)] = [
                (.verifyEmail, IdentityAPI.confirmEmailVerification), (.verifyAndChangeEmail, IdentityAPI.confirmEmailChange),
                (.recoverEmail, IdentityAPI.revertEmailChange),
            ]
            for (mode, method) in methods {
                // The real identity service refuses an unknown code: the refusal page, nothing leaked.
                let unknown = try await Self.post(h, [("mode", mode.rawValue), ("code", Self.strayCode), ("lang", "en")])
                let unknownHTML = Self.expectPage(unknown, .badRequest)
                #expect(unknownHTML.contains(ActionText.english.codeRefused[mode]!) && !unknownHTML.contains(Self.strayCode))

                let refusal: ErrorCode = mode == .verifyEmail ? .invalidVerificationCode : .invalidEmailChangeCode
                h.services.fail(method, with: RPCError(refusal, "no such code"))
                let refused = Self.expectPage(try await Self.post(h, [("mode", mode.rawValue), ("code", Self.strayCode), ("lang", "ja")]), .badRequest)
                #expect(refused.contains(ActionText.japanese.codeRefused[mode]!) && !refused.contains(Self.strayCode))
                #expect(refused.contains(#"role="alert""#) && !refused.contains("<form"))

                h.services.fail(method, with: RPCError(.emailExists, "taken"))
                #expect(Self.expectPage(try await Self.post(h, [("mode", mode.rawValue), ("code", Self.strayCode)]), .conflict)
                    .contains(ActionText.english.emailTaken))
                h.services.fail(method, with: RPCError(.unavailable, "down"))
                let down = try await Self.post(h, [("mode", mode.rawValue), ("code", Self.strayCode)])
                #expect(Self.expectPage(down, .serviceUnavailable).contains(ActionText.english.unavailable))
                #expect(down.headers[.retryAfter] == "1")
                h.services.fail(method, with: RPCError(.userDisabled, "disabled"))
                #expect(Self.expectPage(try await Self.post(h, [("mode", mode.rawValue), ("code", Self.strayCode)]), .forbidden)
                    .contains(ActionText.english.disabled))

                h.services.override(method) { _ in EmailCodeResponse(user: user, revokedSessionIDs: mode == .recoverEmail ? [sid] : []) }
                let done = try await Self.post(h, [("mode", mode.rawValue), ("code", Self.strayCode), ("lang", "ja")])
                let doneHTML = Self.expectPage(done, .ok)
                #expect(doneHTML.contains(ActionText.japanese.done[mode]!.title))
                #expect(doneHTML.contains("ada@example.org") == (mode != .verifyEmail))
                let sent = try #require(h.services.lastRequest(method))
                #expect(sent.code == Self.strayCode && sent.locale == "ja")
            }
            // The revert's revoked session is refused at once.
            #expect(h.parts.revoked.contains(sid, now: h.clock.now))
            _ = try await h.request(.get, "/v1/me", token: access).expectProblem(.unauthorized, "session_revoked")
        }
    }

    @Test("bad forms get pages, never 500: JSON 415, over 4 KiB 413, bad encoding or a repeated field 400, unknown mode or no code 400; a browser's Origin (null or the gateway's own) is accepted")
    func badForms() async throws {
        try await Harness.run { h in
            let json = try await h.request(.post, "/actions", json: #"{"mode":"verifyEmail","code":"x"}"#)
            #expect(Self.expectPage(json, .unsupportedMediaType).contains(ActionText.english.formUnreadable))
            let big = try await h.request(
                .post, "/actions", json: "mode=verifyEmail&code=abc&pad=" + String(repeating: "x", count: 5000),
                contentType: "application/x-www-form-urlencoded")
            Self.expectPage(big, .contentTooLarge)
            for body in ["mode=verifyEmail&code=%ZZ", "mode=verifyEmail&code=abc&code=def", "mode=%FF%FE&code=abc", "mode=verifyEmail&code=a\u{7}b"] {
                let r = try await h.request(.post, "/actions", json: body, contentType: "application/x-www-form-urlencoded")
                #expect(Self.expectPage(r, .badRequest).contains(ActionText.english.formUnreadable), "\(body)")
            }
            for fields in [[("mode", "verifyEmail")], [("mode", "nope"), ("code", Self.strayCode)], [("mode", "verifyEmail"), ("code", "<b>x</b>")], []] {
                let html = Self.expectPage(try await Self.post(h, fields), .badRequest)
                #expect(html.contains(ActionText.english.incompleteTitle) && !html.contains("<b>x"))
            }
            h.services.fail(IdentityAPI.confirmEmailVerification, with: RPCError(.invalidVerificationCode, "no"))
            for origin in ["null", "https://auth.test"] {
                var headers = HTTPFields()
                headers[.origin] = origin
                let r = try await Self.post(h, [("mode", "verifyEmail"), ("code", Self.strayCode)], headers: headers)
                Self.expectPage(r, .badRequest)
            }
        }
    }

    @Test("POST is limited per client address like the JSON confirm routes (the sign-in class): a 429 page with Retry-After")
    func rateLimited() async throws {
        let limits = RateLimits(limits: [.signIn: RateLimit(perSecond: 1.0 / 60, burst: 1)], maxClients: 1000)
        try await Harness.run(.live, configure: { $0.rateLimits = limits }) { h in
            h.services.fail(IdentityAPI.confirmEmailChange, with: RPCError(.invalidEmailChangeCode, "no"))
            Self.expectPage(try await Self.post(h, [("mode", "verifyAndChangeEmail"), ("code", Self.strayCode)]), .badRequest)
            let refused = try await Self.post(h, [("mode", "verifyAndChangeEmail"), ("code", Self.strayCode), ("lang", "ja")])
            let html = Self.expectPage(refused, .tooManyRequests)
            let wait = try #require(refused.headers[.retryAfter])
            #expect(html.contains(ActionText.japanese.rateLimitedTitle) && html.contains("\(wait) 秒"))
            // GET renders without spending the budget.
            Self.expectPage(try await h.request(.get, "/actions?mode=verifyAndChangeEmail&code=\(Self.strayCode)"), .ok)
        }
    }

    @Test("the code and the password never reach the log, even at trace level")
    func nothingLogged() async throws {
        let logs = LogRecorder()
        try await Harness.run(logs: logs) { h in
            let (_, code) = try await Self.requestReset(h)
            _ = try await h.request(.get, "/actions?mode=resetPassword&code=\(code)")
            _ = try await Self.post(h, [("mode", "resetPassword"), ("code", code), ("password", Self.newPW), ("passwordConfirm", "x")])
            _ = try await Self.post(h, [("mode", "resetPassword"), ("code", code), ("password", Self.newPW), ("passwordConfirm", Self.newPW)])
            _ = try await Self.post(h, [("mode", "verifyEmail"), ("code", code)])
        }
        #expect(!logs.lines.isEmpty)
        for line in logs.lines {
            #expect(!line.message.contains(Self.newPW) && !line.message.contains("code=") && !line.message.contains("passwordConfirm"), "\(line.message)")
        }
        let codes = logs.lines.filter { line in line.message.split(whereSeparator: { !$0.isLetter && !$0.isNumber && $0 != "-" && $0 != "_" }).contains { $0.count == 43 } }
        #expect(codes.isEmpty, "\(codes.map(\.message))")
    }
}
