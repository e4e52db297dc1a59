import Foundation
import GatehouseSupport
import GatehouseTestSupport
import ProviderTestSupport
import Testing

/// Seed 002's five cases (A16–A18, A21, A22), linking, unlinking and re-authentication with a
/// provider, over HTTP against three processes and a fake provider.
@Suite("Provider linking over three processes")
struct ProviderLinkingEndToEndTests {
    @Test("A16 case 1: an anonymous user signing in with an Apple identity linked to nobody keeps its id, is no longer anonymous, has providers [apple.com] and the token's email; its old session still refreshes")
    func caseOneLinksToAnonymous() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let made = try await p.anonymous()
        // An anonymous user made long ago (its session refreshed since): the linked session's
        // auth_time is the link's.
        p.stack.advanceClock(by: .seconds(3600))
        let renewed = try await p.stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": made.refresh])
        let session = try #require(renewed.json["session"] as? [String: Any])
        let a = (id: made.id, access: try #require(session["accessToken"] as? String), refresh: try #require(session["refreshToken"] as? String))
        let r = try await p.signIn(
            ["provider": "apple.com", "idToken": p.apple("a-1", rawNonce: "n1", email: "relay@privaterelay.appleid.com"), "nonce": "n1"],
            bearer: a.access)
        #expect(r.status == 200, "\(r.json)")
        let (id, user) = try p.user(r)
        #expect(id == a.id)
        #expect(user["isAnonymous"] as? Bool == false)
        #expect(user["providers"] as? [String] == ["apple.com"])
        #expect(user["email"] as? String == "relay@privaterelay.appleid.com")
        let access = try p.access(r)
        #expect(jwtClaims(access)["is_anonymous"] as? Bool != true)
        #expect(jwtClaims(access)["amr"] as? [String] == ["apple.com"])
        let authTime = try #require(jwtClaims(access)["auth_time"] as? Int)
        #expect(abs(Double(authTime) - p.now.timeIntervalSince1970) < 5)
        let recent = try await p.stack.request("DELETE", "/v1/me/providers/apple.com", bearer: access)
        #expect(recent.json["code"] as? String == "last_sign_in_method", "within the recent-login window, refused only as the last method")
        let refreshed = try await p.stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": a.refresh])
        #expect(refreshed.status == 200)
        // The next sign-in with that identity, signed out, finds the same user.
        let again = try await p.signIn(["provider": "apple.com", "idToken": p.apple("a-1", rawNonce: "n2"), "nonce": "n2"])
        #expect(try p.user(again).id == a.id)
    }

    @Test("A17/A18 case 2: an anonymous user signing in with a Google identity linked to B gets migration_required (A kept, its session working); resume with allowMigration true signs in to B (amr google.com), deletes A and refuses A's refresh token")
    func caseTwoMigrates() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let b = try await p.signIn(["provider": "google.com", "idToken": p.google("g-b", email: "b@example.com")])
        let bID = try p.user(b).id
        let a = try await p.anonymous()
        let asked = try await p.signIn(["provider": "google.com", "idToken": p.google("g-b")], bearer: a.access)
        #expect(asked.status == 409, "\(asked.json)")
        #expect(asked.json["code"] as? String == "migration_required")
        #expect(asked.json["anonymousUserId"] as? String == a.id)
        #expect(asked.json["existingUserId"] as? String == bID)
        let handle = try #require(asked.json["resumeHandle"] as? String)
        #expect(try await p.me(a.access)["id"] as? String == a.id)

        let resumed = try await p.stack.request(
            "POST", "/v1/sessions/resume", json: ["resumeHandle": handle, "allowMigration": true], bearer: a.access)
        #expect(resumed.status == 200, "\(resumed.json)")
        #expect(try p.user(resumed).id == bID)
        let migration = try #require(resumed.json["migration"] as? [String: Any])
        #expect(migration["oldUserId"] as? String == a.id)
        #expect(migration["newUserId"] as? String == bID)
        #expect(migration["performMigration"] as? Bool == true)
        #expect(jwtClaims(try p.access(resumed))["amr"] as? [String] == ["google.com"])
        let stale = try await p.stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": a.refresh])
        #expect(stale.status == 401)
        let gone = try await p.stack.request("GET", "/v1/me", bearer: a.access)
        #expect(gone.status == 401)

        // With a decision up front (allowMigration false): migrated at once.
        let c = try await p.anonymous()
        let direct = try await p.signIn(["provider": "google.com", "idToken": p.google("g-b"), "allowMigration": false], bearer: c.access)
        #expect(direct.status == 200)
        #expect((direct.json["migration"] as? [String: Any])?["performMigration"] as? Bool == false)
        #expect(try p.user(direct).id == bID)
    }

    @Test("A21 case 3 and A22 case 4: U (password) links a Google identity (providers [google.com, password], same id); linking one of V's is credential_already_in_use and changes neither; after the recent-login window linking needs re-authentication")
    func casesThreeAndFour() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let u = try await p.signUp("u@example.com")
        let linked = try await p.signIn(["provider": "google.com", "idToken": p.google("g-u", email: "u@example.com")], bearer: u.access)
        #expect(linked.status == 200, "\(linked.json)")
        #expect(try p.user(linked).id == u.id)
        #expect(try p.user(linked).json["providers"] as? [String] == ["google.com", "password"])
        #expect(try p.user(linked).json["emailVerified"] as? Bool == true, "a verified provider email equal to the user's verifies it")

        let v = try await p.signIn(["provider": "google.com", "idToken": p.google("g-v", email: "v@example.com")])
        let vID = try p.user(v).id
        let w = try await p.signUp("w@example.com")
        let conflict = try await p.signIn(["provider": "google.com", "idToken": p.google("g-v")], bearer: w.access)
        #expect(conflict.status == 409)
        #expect(conflict.json["code"] as? String == "credential_already_in_use")
        #expect(try await p.me(w.access)["providers"] as? [String] == ["password"])
        let vAgain = try await p.signIn(["provider": "google.com", "idToken": p.google("g-v")])
        #expect(try p.user(vAgain).id == vID)
        #expect(try p.user(vAgain).json["providers"] as? [String] == ["google.com"])
        // The link route says the same, and for the caller's own identity provider_already_linked.
        let viaLink = try await p.stack.request("POST", "/v1/me/providers", json: ["provider": "google.com", "idToken": p.google("g-v")], bearer: w.access)
        #expect(viaLink.json["code"] as? String == "credential_already_in_use")
        let own = try await p.stack.request(
            "POST", "/v1/me/providers", json: ["provider": "google.com", "idToken": p.google("g-u")], bearer: try p.access(linked))
        #expect(own.status == 409)
        #expect(own.json["code"] as? String == "provider_already_linked")

        // Past the recent-login window (300 s): re-authenticate, then link.
        p.stack.advanceClock(by: .seconds(301))
        let late = try await p.stack.request(
            "POST", "/v1/me/providers", json: ["provider": "apple.com", "idToken": p.apple("a-w", rawNonce: "n"), "nonce": "n"], bearer: w.access)
        #expect(late.status == 403)
        #expect(late.json["code"] as? String == "requires_recent_login")
        let reauth = try await p.stack.request(
            "POST", "/v1/me/reauthenticate", json: ["password": ProviderStack.password], bearer: w.access)
        let fresh = try p.access(reauth)
        let now = try await p.stack.request(
            "POST", "/v1/me/providers", json: ["provider": "apple.com", "idToken": p.apple("a-w", rawNonce: "n2"), "nonce": "n2"], bearer: fresh)
        #expect(now.status == 200, "\(now.json)")
        #expect(try p.user(now).json["providers"] as? [String] == ["apple.com", "password"])
    }

    @Test("A verified provider email another user has is email_exists for a new sign-in and for an anonymous link, and nothing is created or linked; an unverified one is not stored; Gatehouse never links by email")
    func neverLinksByEmail() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let owner = try await p.signUp("taken@example.com")
        let before = try await p.userCount()
        let r = try await p.signIn(["provider": "google.com", "idToken": p.google("g-x", email: "TAKEN@example.com", verified: true)])
        #expect(r.status == 409)
        #expect(r.json["code"] as? String == "email_exists")
        #expect(try await p.userCount() == before)
        let a = try await p.anonymous()
        let link = try await p.signIn(["provider": "google.com", "idToken": p.google("g-x", email: "taken@example.com")], bearer: a.access)
        #expect(link.json["code"] as? String == "email_exists")
        #expect(try await p.me(a.access)["isAnonymous"] as? Bool == true)
        #expect(try await p.me(owner.access)["providers"] as? [String] == ["password"])

        // An unverified provider email is never stored: the user is made without it, and the
        // address's owner can still sign up (and reset a password) without meeting that user.
        let unverified = try await p.signIn(["provider": "google.com", "idToken": p.google("g-y", email: "free@example.com", verified: false)])
        #expect(unverified.status == 200, "\(unverified.json)")
        #expect(try p.user(unverified).json["email"] is NSNull)
        let free = try await p.signUp("free@example.com")
        #expect(free.id != (try p.user(unverified).id))
        let taken = try await p.signIn(["provider": "google.com", "idToken": p.google("g-z", email: "TAKEN@example.com", verified: false)])
        #expect(taken.status == 200, "an unverified email equal to another user's is neither a conflict nor a link")
        #expect(try p.user(taken).id != owner.id)
    }

    @Test("Unlink: a provider-only user cannot unlink its last provider (409 last_sign_in_method); with two it can; a provider not linked is 404; re-authentication with a linked identity replaces the session, with another's is user_mismatch")
    func unlinkAndReauthenticate() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let first = try await p.signIn(["provider": "google.com", "idToken": p.google("g-only", email: "only@example.com")])
        let id = try p.user(first).id
        let access = try p.access(first)
        let last = try await p.stack.request("DELETE", "/v1/me/providers/google.com", bearer: access)
        #expect(last.status == 409)
        #expect(last.json["code"] as? String == "last_sign_in_method")
        let notLinked = try await p.stack.request("DELETE", "/v1/me/providers/apple.com", bearer: access)
        #expect(notLinked.status == 404)
        #expect(notLinked.json["code"] as? String == "provider_not_linked")

        let linked = try await p.stack.request(
            "POST", "/v1/me/providers", json: ["provider": "apple.com", "idToken": p.apple("a-only", rawNonce: "n"), "nonce": "n"], bearer: access)
        #expect(linked.status == 200, "\(linked.json)")
        let unlinked = try await p.stack.request("DELETE", "/v1/me/providers/google.com", bearer: access)
        #expect(unlinked.status == 200, "\(unlinked.json)")
        #expect((unlinked.json["user"] as? [String: Any])?["providers"] as? [String] == ["apple.com"])
        // The unlinked identity now signs in as a new user.
        let fresh = try await p.signIn(["provider": "google.com", "idToken": p.google("g-only")])
        #expect(try p.user(fresh).id != id)

        let other = try await p.stack.request(
            "POST", "/v1/me/reauthenticate", json: ["provider": "google.com", "idToken": p.google("g-only")], bearer: access)
        #expect(other.status == 403)
        #expect(other.json["code"] as? String == "user_mismatch")
        let reauth = try await p.stack.request(
            "POST", "/v1/me/reauthenticate", json: ["provider": "apple.com", "idToken": p.apple("a-only", rawNonce: "r"), "nonce": "r"],
            bearer: access)
        #expect(reauth.status == 200, "\(reauth.json)")
        #expect(try p.user(reauth).id == id)
        #expect(jwtClaims(try p.access(reauth))["amr"] as? [String] == ["apple.com"])
        let old = try await p.stack.request("GET", "/v1/me", bearer: access)
        #expect(old.status == 401, "the replaced session is refused")

        // The audit log has the sign-up, the refused unlink, the link, the unlink and the
        // re-authentications, each naming its provider, and never a token.
        let audit = try await p.stack.request(
            "GET", "/admin/v1/audit?userId=\(id)&limit=100", bearer: try await p.stack.adminKey(), port: p.stack.adminPort)
        let events = try #require(audit.json["events"] as? [[String: Any]])
        let kinds = events.compactMap { event -> String? in
            guard let kind = event["kind"] as? String else { return nil }
            let provider = (event["detail"] as? [String: Any])?["provider"] as? String
            return provider.map { "\(kind) \($0)" } ?? kind
        }
        for expected in [
            "sign_up google.com", "provider.link_failed google.com", "provider.linked apple.com", "provider.unlinked google.com",
            "reauthenticate.failed google.com", "reauthenticate apple.com",
        ] {
            #expect(kinds.contains(expected), "audit lacks \(expected): \(kinds)")
        }
        #expect(events.first { $0["kind"] as? String == "provider.link_failed" }?["reason"] as? String == "last_sign_in_method")
        let text = String(decoding: try JSONSerialization.data(withJSONObject: events), as: UTF8.self)
        #expect(!text.contains("eyJ"), "no token in the audit log")
    }

    @Test("A stream open on the account sees a link (providers, upgraded, email) and an unlink (providers) as they happen")
    func streamSeesLinks() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let a = try await p.anonymous()
        let stream = try await p.stack.openStream(a.access)
        let snapshot = try await stream.next()
        #expect(snapshot.type == "snapshot", "\(snapshot)")
        let linked = try await p.signIn(
            ["provider": "google.com", "idToken": p.google("g-live", email: "live@example.com")], bearer: a.access)
        #expect(linked.status == 200)
        let link = try await stream.next()
        #expect(link.type == "change" && link.changes.contains("providers") && link.changes.contains("upgraded")
            && link.changes.contains("email"), "\(link)")
        #expect(link.user["providers"] as? [String] == ["google.com"])
        let access = try p.access(linked)
        let apple = try await p.stack.request(
            "POST", "/v1/me/providers", json: ["provider": "apple.com", "idToken": p.apple("a-live", rawNonce: "l"), "nonce": "l"], bearer: access)
        #expect(apple.status == 200)
        let second = try await stream.next()
        #expect(second.changes == ["providers"], "\(second)")
        #expect(try await p.stack.request("DELETE", "/v1/me/providers/google.com", bearer: access).status == 200)
        let unlink = try await stream.next()
        #expect(unlink.changes == ["providers"], "\(unlink)")
        #expect(unlink.user["providers"] as? [String] == ["apple.com"])
    }
}

/// Bad input on the provider routes: each refused with its status and stable code, nothing created.
@Suite("Provider routes refuse bad input over three processes")
struct ProviderBadInputEndToEndTests {
    @Test("malformed JSON, a wrong type, an over-long token, nonce, code or name, a provider id of bad characters, a non-https redirectURI, an unlink of a bad id, a notification that is not JSON or too large: 4xx with a stable code, never 5xx, nobody created")
    func badInput() async throws {
        let p = try await ProviderStack.start()
        defer { Task { await p.stop() } }
        let token = p.google("g-bad", email: "bad@example.com")
        let cases: [(body: Data, status: Int, code: String)] = [
            (Data("{not json".utf8), 400, "malformed_request"),
            (try JSONSerialization.data(withJSONObject: ["provider": 5, "idToken": token]), 400, "malformed_request"),
            (try JSONSerialization.data(withJSONObject: ["provider": "google.com", "idToken": String(repeating: "a", count: 17_000)]), 422, "invalid_argument"),
            (try JSONSerialization.data(withJSONObject: ["provider": "google.com", "idToken": token, "nonce": String(repeating: "n", count: 600)]), 422, "invalid_argument"),
            (try JSONSerialization.data(withJSONObject: ["provider": "google.com", "idToken": token, "authorizationCode": String(repeating: "c", count: 1100)]), 422, "invalid_argument"),
            (try JSONSerialization.data(withJSONObject: ["provider": "google.com", "idToken": token, "displayName": String(repeating: "d", count: 300)]), 422, "invalid_argument"),
            (try JSONSerialization.data(withJSONObject: ["provider": "goo gle/../x", "idToken": token]), 422, "invalid_argument"),
            (try JSONSerialization.data(withJSONObject: ["provider": "password", "idToken": token]), 422, "invalid_argument"),
        ]
        for (body, status, code) in cases {
            let r = try await p.stack.request("POST", "/v1/sessions/provider", rawBody: body, headers: ["Content-Type": "application/json"])
            #expect(r.status == status && r.json["code"] as? String == code, "\(String(decoding: body.prefix(60), as: UTF8.self)): \(r.status) \(r.json)")
        }
        let text = try await p.stack.request(
            "POST", "/v1/sessions/provider", rawBody: Data("provider=google.com".utf8), headers: ["Content-Type": "text/plain"])
        #expect(text.status == 415)
        let appleWeb = try await p.signIn([
            "provider": "apple.com", "idToken": p.apple("a-bad", rawNonce: "n"), "nonce": "n", "authorizationCode": "c",
            "redirectURI": "http://app.example.com/cb",
        ])
        #expect(appleWeb.status == 422 && appleWeb.json["code"] as? String == "invalid_argument", "a redirectURI must be https: \(appleWeb.json)")

        let u = try await p.signUp("bad-input@example.com")
        let unlink = try await p.stack.request("DELETE", "/v1/me/providers/bad%20id", bearer: u.access)
        #expect(unlink.status == 422 && unlink.json["code"] as? String == "invalid_argument", "\(unlink.status) \(unlink.json)")

        for body in [Data("garbage".utf8), Data(#"{"payload":"a.b.c"}"#.utf8), Data(repeating: 0x61, count: 20_000)] {
            let r = try await p.stack.request(
                "POST", "/v1/providers/apple/notifications", rawBody: body, headers: ["Content-Type": "application/json"])
            #expect((400..<500).contains(r.status), "notification \(body.count) bytes: \(r.status) \(r.json)")
            #expect(r.json["code"] as? String != nil)
        }
        #expect(try await p.userCount() == 1, "only the password sign-up above")
    }
}
