import Foundation
import GatehouseTestSupport
import GatehouseApp
import Testing

/// Scenario A30 over HTTP against three processes. The code is read from the mail delivered to
/// the local mailbox (the embedded default: one `.eml` file per mail in the data folder, as
/// `gatehouse mail show` reads it); `MailRelayEndToEndTests` runs it again through a real SMTP
/// relay.
@Suite("Password reset over three processes")
struct PasswordResetEndToEndTests {
    static let pw = "correct horse battery"
    static let newPW = "saffron kettle obelisk"

    /// The password reset mails delivered to `stack`'s local mailbox, oldest first.
    static func outbox(_ stack: Stack) throws -> [DeliveredMail] { try stack.deliveredMails("password_reset") }

    @Test("A30: a known email gets a mail with a code; a second request voids the first; confirming sets the password and revokes every session; an unknown email gets the same 202 and no mail; a malformed one invalid_email")
    func a30() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let signedUp = try await stack.request("POST", "/v1/accounts", json: ["email": "ada@example.com", "password": Self.pw])
        #expect(signedUp.status == 201)
        let session = try #require(signedUp.json["session"] as? [String: Any])
        let access = try #require(session["accessToken"] as? String)
        let refresh = try #require(session["refreshToken"] as? String)

        // 1. Request for a known email: 202 and one mail carrying the code.
        let first = try await stack.request("POST", "/v1/password-reset", json: ["email": "ada@example.com"])
        #expect(first.status == 202 && first.body.isEmpty)
        try await waitUntil("the first reset mail is delivered") { try Self.outbox(stack).count == 1 }
        let mail = try #require(try Self.outbox(stack).first)
        #expect(mail.to == "ada@example.com")
        let code1 = try #require(mail.code)

        // 2. A second request (past the one-a-minute limit per address): a new mail; the first code is refused.
        stack.advanceClock(by: .seconds(61))
        let second = try await stack.request("POST", "/v1/password-reset", json: ["email": "ada@example.com"], headers: ["Accept-Language": "ja"])
        #expect(second.status == 202)
        try await waitUntil("the second reset mail is delivered") { try Self.outbox(stack).count == 2 }
        let mail2 = try Self.outbox(stack)[1]
        #expect(mail2.subject == "Gatehouse のパスワード再設定")
        let code2 = try #require(mail2.code)
        #expect(code2 != code1)
        let stale = try await stack.request("POST", "/v1/password-reset/confirm", json: ["code": code1, "password": Self.newPW])
        #expect(stale.status == 400 && stale.json["code"] as? String == "invalid_reset_code")

        // 3. Confirm with the new code: the old password fails, the new works, existing sessions are refused.
        let confirmed = try await stack.request("POST", "/v1/password-reset/confirm", json: ["code": code2, "password": Self.newPW])
        #expect(confirmed.status == 204)
        let old = try await stack.request("POST", "/v1/sessions", json: ["email": "ada@example.com", "password": Self.pw])
        #expect(old.status == 401 && old.json["code"] as? String == "invalid_credentials")
        let new = try await stack.request("POST", "/v1/sessions", json: ["email": "ada@example.com", "password": Self.newPW])
        #expect(new.status == 200)
        let me = try await stack.request("GET", "/v1/me", bearer: access)
        #expect(me.status == 401)
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": refresh])
        #expect(refreshed.status == 401)
        let reused = try await stack.request("POST", "/v1/password-reset/confirm", json: ["code": code2, "password": "another fine passphrase"])
        #expect(reused.status == 400 && reused.json["code"] as? String == "invalid_reset_code")

        // 4. An unknown email: the same 202, and no mail. A request for a known address after it
        // is queued once that one's work is done.
        let unknown = try await stack.request("POST", "/v1/password-reset", json: ["email": "nobody@example.com"])
        #expect(unknown.status == 202 && unknown.body == first.body)
        #expect(unknown.headers["cache-control"] == first.headers["cache-control"])
        #expect(try await stack.request("POST", "/v1/accounts", json: ["email": "bo@example.com", "password": Self.pw]).status == 201)
        #expect(try await stack.request("POST", "/v1/password-reset", json: ["email": "bo@example.com"]).status == 202)
        try await waitUntil("bo's reset mail is delivered") { try Self.outbox(stack).contains { $0.to == "bo@example.com" } }
        #expect(try Self.outbox(stack).map(\.to) == ["ada@example.com", "ada@example.com", "bo@example.com"])

        // 5. A malformed email.
        let malformed = try await stack.request("POST", "/v1/password-reset", json: ["email": "not an email"])
        #expect(malformed.status == 422 && malformed.json["code"] as? String == "invalid_email")
    }
}
