import Foundation
import NIOCore
import NIOPosix
import Testing
@testable import LoadGenerator

@Suite("Body checks")
struct ResponseCheckTests {
    let good = #"{"user":{"id":"u1","email":"a@example.com"},"session":{"accessToken":"a","refreshToken":"r","tokenType":"Bearer","expiresIn":900}}"#

    @Test func authBody() {
        guard case .ok(let user) = ResponseChecks.checkAuth(Array(good.utf8), email: "a@example.com") else {
            Issue.record("good body refused")
            return
        }
        #expect(user.id == "u1")
        #expect(user.session == SessionTokens(accessToken: "a", refreshToken: "r", expiresIn: 900))
        guard case .bad = ResponseChecks.checkAuth(Array(good.utf8), email: "b@example.com") else {
            Issue.record("wrong email accepted")
            return
        }
        let noRefresh = #"{"user":{"id":"u1","email":"a@example.com"},"session":{"accessToken":"a","tokenType":"Bearer","expiresIn":900}}"#
        guard case .bad = ResponseChecks.checkAuth(Array(noRefresh.utf8), email: "a@example.com") else {
            Issue.record("missing refresh token accepted")
            return
        }
        guard case .bad = ResponseChecks.checkAuth(Array("not json".utf8), email: "a@example.com") else {
            Issue.record("non-JSON accepted")
            return
        }
    }

    @Test func refreshBody() {
        let body = Array(#"{"session":{"accessToken":"a","refreshToken":"r2","tokenType":"Bearer","expiresIn":900}}"#.utf8)
        guard case .ok = ResponseChecks.checkRefresh(body, presented: "r1") else {
            Issue.record("rotated refresh refused")
            return
        }
        guard case .bad = ResponseChecks.checkRefresh(body, presented: "r2") else {
            Issue.record("unrotated refresh accepted")
            return
        }
    }

    @Test func meBody() {
        guard case .ok = ResponseChecks.checkMe(Array(#"{"id":"u1"}"#.utf8), expectedID: "u1") else {
            Issue.record("good me refused")
            return
        }
        guard case .bad = ResponseChecks.checkMe(Array(#"{"id":"u2"}"#.utf8), expectedID: "u1") else {
            Issue.record("someone else's user accepted")
            return
        }
        guard case .bad = ResponseChecks.checkMe(Array(#"{"email":"x"}"#.utf8), expectedID: nil) else {
            Issue.record("me without id accepted")
            return
        }
    }
}
