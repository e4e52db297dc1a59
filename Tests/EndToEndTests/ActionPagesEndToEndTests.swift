import Foundation
import GatehouseApp
import GatehouseTestSupport
import Testing

/// Issue 19 §6 over three processes for the email modes (the reset mode runs in a real browser in
/// `BrowserResetEndToEndTests`): the link in each delivered mail opens the gateway's page, a GET
/// changes nothing, and the page's form post does the action.
@Suite("Mail links to the action pages over three processes")
struct ActionPagesEndToEndTests {
    static let pw = "correct horse battery"

    /// The link in the newest delivered mail of `kind` (waiting for the `count`th), split into its query items.
    static func link(_ stack: Stack, _ kind: String, number count: Int) async throws -> (path: String, items: [String: String]) {
        try await waitUntil("mail \(count) of \(kind) is delivered") { try stack.deliveredMails(kind).count >= count }
        let link = try #require(try stack.deliveredMails(kind)[count - 1].link)
        #expect(link.hasPrefix(stack.baseURL + "/actions?"), "\(link)")
        let components = try #require(URLComponents(string: link))
        let items = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { first, _ in first }
        return (String(link.dropFirst(stack.baseURL.count)), items)
    }

    /// Posts the page's form for `link` (mode, code, lang) as a browser would.
    static func submit(_ stack: Stack, _ link: (path: String, items: [String: String])) async throws -> Stack.Response {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-_.")
        let form = ["mode", "code", "lang"].map { "\($0)=\(link.items[$0]?.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
            .joined(separator: "&")
        return try await stack.request(
            "POST", "/actions", rawBody: Data(form.utf8),
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Origin": stack.baseURL])
    }

    static func me(_ stack: Stack, _ access: String) async throws -> [String: Any] {
        let me = try await stack.request("GET", "/v1/me", bearer: access)
        #expect(me.status == 200)
        return me.json
    }

    @Test("verifyEmail, verifyAndChangeEmail and recoverEmail: each mailed link's GET changes nothing and its form post does the action, in the mail's language")
    func emailModes() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let signedUp = try await stack.request("POST", "/v1/accounts", json: ["email": "ada@example.com", "password": Self.pw])
        #expect(signedUp.status == 201)
        let access = try #require((signedUp.json["session"] as? [String: Any])?["accessToken"] as? String)

        // Verification: the link's GET leaves the address unverified; the form post verifies it.
        let asked = try await stack.request("POST", "/v1/me/email-verification", headers: ["Accept-Language": "ja"], bearer: access)
        #expect(asked.status == 202)
        let verify = try await Self.link(stack, "verify_email", number: 1)
        #expect(verify.items["mode"] == "verifyEmail" && verify.items["lang"] == "ja")
        let page = try await stack.request("GET", verify.path)
        #expect(page.status == 200 && String(decoding: page.body, as: UTF8.self).contains("lang=\"ja\""))
        #expect(try await Self.me(stack, access)["emailVerified"] as? Bool == false)
        let verified = try await Self.submit(stack, verify)
        #expect(verified.status == 200 && verified.headers["content-type"]?.hasPrefix("text/html") == true)
        #expect(try await Self.me(stack, access)["emailVerified"] as? Bool == true)
        #expect(try await Self.submit(stack, verify).status == 400)  // used

        // Email change: the link mailed to the new address confirms it.
        let change = try await stack.request("PUT", "/v1/me/email", json: ["email": "ada.new@example.com"], bearer: access)
        #expect(change.status == 202)
        let confirm = try await Self.link(stack, "change_email", number: 1)
        #expect(confirm.items["mode"] == "verifyAndChangeEmail" && confirm.items["lang"] == "en")
        #expect(try await stack.request("GET", confirm.path).status == 200)
        #expect(try await Self.me(stack, access)["email"] as? String == "ada@example.com")
        #expect(try await Self.submit(stack, confirm).status == 200)
        #expect(try await Self.me(stack, access)["email"] as? String == "ada.new@example.com")

        // The notice to the old address: its link's GET changes nothing; the post restores the
        // address and every session is refused at once.
        let recover = try await Self.link(stack, "email_changed", number: 1)
        #expect(recover.items["mode"] == "recoverEmail")
        #expect(try await stack.request("GET", recover.path).status == 200)
        #expect(try await Self.me(stack, access)["email"] as? String == "ada.new@example.com")
        let recovered = try await Self.submit(stack, recover)
        #expect(recovered.status == 200)
        #expect(try await stack.request("GET", "/v1/me", bearer: access).status == 401)
        // The password ended with the revert: the reset link mailed to the restored address sets a
        // new one through the page.
        #expect(try await stack.request("POST", "/v1/sessions", json: ["email": "ada@example.com", "password": Self.pw]).status == 401)
        let reset = try await Self.link(stack, "password_reset", number: 1)
        #expect(reset.items["mode"] == "resetPassword")
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-_.")
        let newPassword = "saffron kettle obelisk"
        let form = "mode=resetPassword&code=\(reset.items["code"]!.addingPercentEncoding(withAllowedCharacters: allowed)!)&lang=en"
            + "&password=saffron+kettle+obelisk&passwordConfirm=saffron+kettle+obelisk"
        let set = try await stack.request(
            "POST", "/actions", rawBody: Data(form.utf8), headers: ["Content-Type": "application/x-www-form-urlencoded", "Origin": stack.baseURL])
        #expect(set.status == 200)
        let back = try await stack.request("POST", "/v1/sessions", json: ["email": "ada@example.com", "password": newPassword])
        #expect(back.status == 200 && (back.json["user"] as? [String: Any])?["email"] as? String == "ada@example.com")
    }
}
