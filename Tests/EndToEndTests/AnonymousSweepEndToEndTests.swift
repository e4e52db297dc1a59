import Foundation
@testable import SQLiteStores
import IdentityPorts
import GatehouseTestSupport
import IdentityCore
import IdentityService
import Testing

/// The sweep of inactive anonymous users (issue 18 §1) over three processes whose clock the test
/// moves (`Stack.advanceClock`): the identity role sweeps every second of real time, each pass
/// measuring the retention (the default 30 days) on the moved clock.
@Suite("Anonymous sweep over three processes")
struct AnonymousSweepEndToEndTests {
    static func session(_ response: Stack.Response) -> (userID: String, refresh: String) {
        let user = response.json["user"] as? [String: Any]
        let session = response.json["session"] as? [String: Any]
        return (user?["id"] as? String ?? "", session?["refreshToken"] as? String ?? "")
    }

    @Test("an idle anonymous user is removed with its sessions; one that refreshed stays; a user with an email is never touched")
    func sweep() async throws {
        let stack = Stack()
        defer { stack.stopAll() }
        try stack.start("identity", environment: ["GATEHOUSE_ANONYMOUS_SWEEP_INTERVAL": "1"])
        // Sessions idle for 60 days (not the default 30) may still refresh, so a refused refresh
        // below is the sweep's doing, not the idle timeout's.
        try stack.start("token", environment: ["GATEHOUSE_SESSION_IDLE_TTL": "5184000"])
        try stack.start("gateway")
        try await stack.waitReady()
        let idle = Self.session(try await stack.request("POST", "/v1/accounts/anonymous"))
        let refreshing = Self.session(try await stack.request("POST", "/v1/accounts/anonymous"))
        let withEmail = Self.session(try await stack.request(
            "POST", "/v1/accounts", json: ["email": "kept@example.com", "password": "correct horse battery staple"]))
        #expect(![idle.userID, refreshing.userID, withEmail.userID].contains(""))

        // Day 20: one anonymous user refreshes its session.
        stack.advanceClock(by: .seconds(20 * 86_400))
        let refreshed = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": refreshing.refresh])
        #expect(refreshed.status == 200)
        let nextRefresh = (refreshed.json["session"] as? [String: Any])?["refreshToken"] as? String ?? ""

        // Day 31: the other has been idle past the retention; a pass (within a second) removes it.
        stack.advanceClock(by: .seconds(11 * 86_400))
        let store = try await SQLiteUserStore.open(path: stack.dataDir.appendingPathComponent("identity.sqlite").path)
        try await waitUntil("the sweep removing the idle anonymous user", timeout: .seconds(30), interval: .milliseconds(100)) {
            try await store.user(id: UserID(idle.userID)) == nil
        }
        // Its session was revoked with it: its refresh token is refused.
        let refused = try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": idle.refresh])
        #expect(refused.status == 401)
        #expect(refused.json["code"] as? String == "session_revoked")
        // The one that refreshed on day 20 and the user with an email are still there and refresh.
        #expect(try await store.user(id: UserID(refreshing.userID)) != nil)
        #expect(try await store.user(id: UserID(withEmail.userID)) != nil)
        #expect(try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": nextRefresh]).status == 200)
        #expect(try await stack.request("POST", "/v1/sessions/refresh", json: ["refreshToken": withEmail.refresh]).status == 200)
    }
}
