import Foundation
import IdentityService
import Testing
@testable import GatehouseApp

@Suite("GATEHOUSE_RECENT_LOGIN_WINDOW")
struct RecentLoginConfigTests {
    func settings(_ value: String?) throws -> IdentityRoleSettings {
        var environment = ["GATEHOUSE_ALLOW_PLAINTEXT": "true"]
        if let value { environment["GATEHOUSE_RECENT_LOGIN_WINDOW"] = value }
        return try IdentityRoleSettings(config: Config(environment: environment))
    }

    @Test("300 s by default; 0 (always refuse) up to 604800 accepted; anything else names the key")
    func window() throws {
        #expect(try settings(nil).service.recentLoginWindow == 300)
        #expect(try settings("0").service.recentLoginWindow == 0)
        #expect(try settings("604800").service.recentLoginWindow == 604_800)
        for bad in ["-1", "604801", "5m", ""] {
            #expect {
                try settings(bad)
            } throws: { error in
                (error as? ConfigError)?.message.contains("GATEHOUSE_RECENT_LOGIN_WINDOW") == true
            }
        }
    }
}
