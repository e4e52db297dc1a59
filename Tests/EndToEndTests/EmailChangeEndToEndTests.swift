import Foundation
import GatehouseApp
import GatehouseTestSupport
import Testing

/// Scenario A28 with the confirmed email change (issue 19 §4) over HTTP against three processes.
/// Codes are read from the mails delivered to the local mailbox (one `.eml` file per mail in the
/// data folder, as `gatehouse mail show` reads it).
@Suite("Email change over three processes")
struct EmailChangeEndToEndTests {
    static let pw = "correct horse battery"

    /// The mails of `kind` delivered to `stack`'s local mailbox, oldest first.
    static func mails(_ stack: Stack, _ kind: String) throws -> [DeliveredMail] { try stack.deliveredMails(kind) }

    /// Waits for the `count`th mail of `kind` and returns its code.
    static func code(_ stack: Stack, _ kind: String, number count: Int) async throws -> (to: String, code: String) {
        try await waitUntil("mail \(count) of \(kind) is delivered") { try Self.mails(stack, kind).count >= count }
        let mail = try Self.mails(stack, kind)[count - 1]
        return (mail.to, try #require(mail.code))
    }

    func session(_ response: Stack.Response) -> (access: String, refresh: String) {
        let session = response.json["session"] as? [String: Any] ?? [:]
        return (session["accessToken"] as? String ?? "", session["refreshToken"] as? String ?? "")
    }

    func signIn(_ stack: Stack, _ email: String) async throws -> Stack.Response {
        try await stack.request("POST", "/v1/sessions", json: ["email": email, "password": Self.pw])
    }

    @Test("A28: taken 409, malformed 422; a change is pending (202) until the code mailed to the new address confirms it; a superseded code is refused; taken meanwhile 409 and the code still works; confirmed: verified, sign-in and tokens use the new address; the old address's revert code restores it and refuses every old token at once; a pending code is refused after that")
    func a28() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let signedUp = try await stack.request("POST", "/v1/accounts", json: ["email": "old@example.com", "password": Self.pw])
        #expect(signedUp.status == 201)
        let me = session(signedUp)
        let other = session(try await signIn(stack, "old@example.com"))
        #expect(try await stack.request("POST", "/v1/accounts", json: ["email": "taken@example.com", "password": Self.pw]).status == 201)

        // 1. Refusals.
        let taken = try await stack.request("PUT", "/v1/me/email", json: ["email": "taken@example.com"], bearer: me.access)
        #expect(taken.status == 409 && taken.json["code"] as? String == "email_exists")
        let invalid = try await stack.request("PUT", "/v1/me/email", json: ["email": "not-an-email"], bearer: me.access)
        #expect(invalid.status == 422 && invalid.json["code"] as? String == "invalid_email")

        // 2. Pending: 202, the address unchanged, a mail to the new address.
        let pending = try await stack.request("PUT", "/v1/me/email", json: ["email": "new@example.com"], bearer: me.access)
        #expect(pending.status == 202)
        #expect(pending.json["pendingEmail"] as? String == "new@example.com" && pending.json["expiresIn"] as? Int == 3600)
        #expect(try await stack.request("GET", "/v1/me", bearer: me.access).json["email"] as? String == "old@example.com")
        let first = try await Self.code(stack, "change_email", number: 1)
        #expect(first.to == "new@example.com")

        // 3. A newer request supersedes the first code.
        stack.advanceClock(by: .seconds(61))
        #expect(try await stack.request("PUT", "/v1/me/email", json: ["email": "new@example.com"], bearer: me.access).status == 202)
        let second = try await Self.code(stack, "change_email", number: 2)
        let superseded = try await stack.request("POST", "/v1/email-change/confirm", json: ["code": first.code])
        #expect(superseded.status == 400 && superseded.json["code"] as? String == "invalid_email_change_code")

        // 4. Taken meanwhile: 409, and the code works once the address is free again.
        let squatter = try await stack.request("POST", "/v1/accounts", json: ["email": "new@example.com", "password": Self.pw])
        #expect(squatter.status == 201)
        let conflict = try await stack.request("POST", "/v1/email-change/confirm", json: ["code": second.code])
        #expect(conflict.status == 409 && conflict.json["code"] as? String == "email_exists")
        #expect(try await stack.request("DELETE", "/v1/me", bearer: session(squatter).access).status == 204)

        // 5. Confirmed: the new address, verified; sign-in and refreshed tokens use it.
        #expect(try await stack.request("POST", "/v1/email-change/confirm", json: ["code": second.code]).status == 204)
        let changed = try await stack.request("GET", "/v1/me", bearer: me.access)
        #expect(changed.json["email"] as? String == "new@example.com" && changed.json["emailVerified"] as? Bool == true)
        #expect(try await signIn(stack, "new@example.com").status == 200)
        #expect(try await signIn(stack, "old@example.com").status == 401)
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": me.refresh])
        let claims = jwtClaims(session(refreshed).access)
        #expect(claims["email"] as? String == "new@example.com" && claims["email_verified"] as? Bool == true)
        let notice = try await Self.code(stack, "email_changed", number: 1)
        #expect(notice.to == "old@example.com")

        // 6. Another change is pending when the old address's owner reverts: every token of the
        // user is refused at once, the old address is back (verified), the pending code is refused.
        stack.advanceClock(by: .seconds(61))
        let access = session(refreshed).access
        #expect(try await stack.request("PUT", "/v1/me/email", json: ["email": "third@example.com"], bearer: access).status == 202)
        let third = try await Self.code(stack, "change_email", number: 3)
        #expect(try await stack.request("POST", "/v1/email-change/revert", json: ["code": notice.code]).status == 204)
        for token in [access, other.access] {
            let refused = try await stack.request("GET", "/v1/me", bearer: token)
            #expect(refused.status == 401)
        }
        for token in [session(refreshed).refresh, other.refresh] {
            #expect(try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": token]).status == 401)
        }
        // The password ended with the revert (a takeover usually sets its own): the old password is
        // refused, and the reset mail to the restored address sets a new one.
        #expect(try await signIn(stack, "old@example.com").status == 401)
        let reset = try await Self.code(stack, "password_reset", number: 1)
        #expect(reset.to == "old@example.com")
        let newPassword = "saffron kettle obelisk"
        let confirmedReset = try await stack.request("POST", "/v1/password-reset/confirm", json: ["code": reset.code, "password": newPassword])
        #expect(confirmedReset.status == 204)
        let restored = try await stack.request("POST", "/v1/sessions", json: ["email": "old@example.com", "password": newPassword])
        #expect(restored.status == 200)
        let user = restored.json["user"] as? [String: Any] ?? [:]
        #expect(user["email"] as? String == "old@example.com" && user["emailVerified"] as? Bool == true)
        let stale = try await stack.request("POST", "/v1/email-change/confirm", json: ["code": third.code])
        #expect(stale.status == 400 && stale.json["code"] as? String == "invalid_email_change_code")
        let again = try await stack.request("POST", "/v1/email-change/revert", json: ["code": notice.code])
        #expect(again.status == 400 && again.json["code"] as? String == "invalid_email_change_code")
    }
}
