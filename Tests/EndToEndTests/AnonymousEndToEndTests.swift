import Foundation
import GatehouseTestSupport
import Testing

/// The claims of a JWT, read without verifying it.
func jwtClaims(_ token: String) -> [String: Any] {
    let parts = token.split(separator: ".")
    guard parts.count == 3 else { return [:] }
    var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while payload.count % 4 != 0 { payload += "=" }
    guard let data = Data(base64Encoded: payload) else { return [:] }
    return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
}

@Suite("Anonymous accounts over three processes")
struct AnonymousEndToEndTests {
    @Test("A14: an anonymous start is a user without email, isAnonymous in /v1/me, is_anonymous in its tokens, and it refreshes")
    func anonymousStart() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try await stack.startThreeRoles()
        let created = try await stack.request("POST", "/v1/accounts/anonymous")
        #expect(created.status == 201)
        let user = try #require(created.json["user"] as? [String: Any])
        #expect(user["isAnonymous"] as? Bool == true)
        #expect(user["email"] is NSNull)
        let session = try #require(created.json["session"] as? [String: Any])
        let access = try #require(session["accessToken"] as? String)
        #expect(jwtClaims(access)["is_anonymous"] as? Bool == true)
        #expect(jwtClaims(access)["sub"] as? String == user["id"] as? String)
        let me = try await stack.request("GET", "/v1/me", bearer: access)
        #expect(me.status == 200 && me.json["isAnonymous"] as? Bool == true)
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": session["refreshToken"] as? String ?? ""])
        #expect(refreshed.status == 200)
        let next = (refreshed.json["session"] as? [String: Any])?["accessToken"] as? String ?? ""
        #expect(jwtClaims(next)["is_anonymous"] as? Bool == true)
        #expect(try await stack.request("GET", "/v1/me", bearer: next).json["id"] as? String == user["id"] as? String)
    }
}
