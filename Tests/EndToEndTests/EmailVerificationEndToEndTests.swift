import Foundation
import GatehouseApp
import GatehouseTestSupport
import Testing

/// Email verification (issue 19 §3) over HTTP against three processes, in each
/// `GATEHOUSE_EMAIL_VERIFICATION` mode. The code is read from the mail delivered to the local
/// mailbox (one `.eml` file per mail in the data folder), as a user would from their inbox.
@Suite("Email verification over three processes")
struct EmailVerificationEndToEndTests {
    static let pw = "correct horse battery"

    /// The verification mails delivered to `stack`'s local mailbox, oldest first.
    static func mails(_ stack: Stack) throws -> [DeliveredMail] { try stack.deliveredMails("verify_email") }

    /// A stack of three processes, the identity service in `mode`.
    static func start(_ mode: String) async throws -> Stack {
        let stack = Stack()
        try stack.start("identity", environment: ["GATEHOUSE_EMAIL_VERIFICATION": mode])
        try stack.start("token")
        try stack.start("gateway")
        try await stack.waitReady()
        return stack
    }

    static func session(_ r: Stack.Response) throws -> (access: String, refresh: String) {
        let session = try #require(r.json["session"] as? [String: Any])
        return (try #require(session["accessToken"] as? String), try #require(session["refreshToken"] as? String))
    }

    @Test("off: no mail at sign-up; POST /v1/me/email-verification mails a code; confirming it verifies the address and the refreshed access token says email_verified: true")
    func off() async throws {
        let stack = try await Self.start("off")
        defer { stack.stopAll() }
        let signedUp = try await stack.request("POST", "/v1/accounts", json: ["email": "ada@example.com", "password": Self.pw])
        #expect(signedUp.status == 201)
        let (access, refresh) = try Self.session(signedUp)
        #expect(jwtClaims(access)["email_verified"] as? Bool == false)
        let sent = try await stack.request("POST", "/v1/me/email-verification", bearer: access)
        #expect(sent.status == 202)
        #expect(sent.json["email"] as? String == "ada@example.com" && sent.json["expiresIn"] as? Int == 86_400)
        try await waitUntil("the verification mail is delivered") { try Self.mails(stack).count == 1 }
        #expect(try Self.mails(stack).map(\.to) == ["ada@example.com"])
        let code = try #require(try Self.mails(stack).first?.code)

        let confirmed = try await stack.request("POST", "/v1/email-verification/confirm", json: ["code": code])
        #expect(confirmed.status == 204)
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": refresh])
        #expect(refreshed.status == 200)
        #expect(jwtClaims(try Self.session(refreshed).access)["email_verified"] as? Bool == true)
        let me = try await stack.request("GET", "/v1/me", bearer: access)
        #expect(me.json["emailVerified"] as? Bool == true)
        let reused = try await stack.request("POST", "/v1/email-verification/confirm", json: ["code": code])
        #expect(reused.status == 400 && reused.json["code"] as? String == "invalid_verification_code")
        let again = try await stack.request("POST", "/v1/me/email-verification", bearer: access)
        #expect(again.status == 409 && again.json["code"] as? String == "email_already_verified")
    }

    @Test("send: sign-up (with a session) and an anonymous user's upgrade each mail a code in the client's language; the upgraded user's code verifies it, email_verified after refresh; a second mail within a minute is 429 with Retry-After")
    func send() async throws {
        let stack = try await Self.start("send")
        defer { stack.stopAll() }
        let signedUp = try await stack.request(
            "POST", "/v1/accounts", json: ["email": "bo@example.com", "password": Self.pw], headers: ["Accept-Language": "ja"])
        #expect(signedUp.status == 201)
        let (access, _) = try Self.session(signedUp)
        try await waitUntil("bo's verification mail is delivered") { try Self.mails(stack).count == 1 }
        #expect(try Self.mails(stack).first?.subject == "Gatehouse メールアドレスの確認")
        let limited = try await stack.request("POST", "/v1/me/email-verification", bearer: access)
        #expect(limited.status == 429 && limited.json["code"] as? String == "rate_limited")
        #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 > 0)

        let anonymous = try await stack.request("POST", "/v1/accounts/anonymous")
        let (anonymousAccess, _) = try Self.session(anonymous)
        let upgraded = try await stack.request(
            "POST", "/v1/me/upgrade", json: ["email": "cy@example.com", "password": Self.pw], bearer: anonymousAccess)
        #expect(upgraded.status == 200)
        let (_, refresh) = try Self.session(upgraded)
        try await waitUntil("cy's verification mail is delivered") { try Self.mails(stack).contains { $0.to == "cy@example.com" } }
        let code = try #require(try Self.mails(stack).first { $0.to == "cy@example.com" }?.code)
        #expect(try await stack.request("POST", "/v1/email-verification/confirm", json: ["code": code]).status == 204)
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": refresh])
        #expect(jwtClaims(try Self.session(refreshed).access)["email_verified"] as? Bool == true)
    }

    @Test("required: sign-up gets no session; sign-in with the right password is 403 email_not_verified; a new mail by address (the older code then void); the code verifies; sign-in then works with email_verified: true")
    func required() async throws {
        let stack = try await Self.start("required")
        defer { stack.stopAll() }
        let signedUp = try await stack.request("POST", "/v1/accounts", json: ["email": "di@example.com", "password": Self.pw])
        #expect(signedUp.status == 201)
        #expect(signedUp.json["verificationRequired"] as? Bool == true && signedUp.json["session"] == nil)
        let blocked = try await stack.request("POST", "/v1/sessions", json: ["email": "di@example.com", "password": Self.pw])
        #expect(blocked.status == 403 && blocked.json["code"] as? String == "email_not_verified")
        let wrong = try await stack.request("POST", "/v1/sessions", json: ["email": "di@example.com", "password": "not the password"])
        #expect(wrong.status == 401 && wrong.json["code"] as? String == "invalid_credentials")
        try await waitUntil("the sign-up's verification mail is delivered") { try Self.mails(stack).count == 1 }
        let first = try #require(try Self.mails(stack).first?.code)

        stack.advanceClock(by: .seconds(61))  // past the one-a-minute limit per user
        let asked = try await stack.request("POST", "/v1/email-verification", json: ["email": "di@example.com"])
        let unknown = try await stack.request("POST", "/v1/email-verification", json: ["email": "nobody@example.com"])
        #expect(asked.status == 202 && unknown.status == 202 && asked.body == unknown.body)
        try await waitUntil("the requested verification mail is delivered") { try Self.mails(stack).count == 2 }
        let second = try #require(try Self.mails(stack).last?.code)
        let stale = try await stack.request("POST", "/v1/email-verification/confirm", json: ["code": first])
        #expect(stale.status == 400 && stale.json["code"] as? String == "invalid_verification_code")
        #expect(try await stack.request("POST", "/v1/email-verification/confirm", json: ["code": second]).status == 204)

        let signedIn = try await stack.request("POST", "/v1/sessions", json: ["email": "di@example.com", "password": Self.pw])
        #expect(signedIn.status == 200)
        #expect(jwtClaims(try Self.session(signedIn).access)["email_verified"] as? Bool == true)
        #expect(try Self.mails(stack).map(\.to) == ["di@example.com", "di@example.com"])
    }
}
