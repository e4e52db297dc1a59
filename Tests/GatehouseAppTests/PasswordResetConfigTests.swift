import Foundation
import Gateway
import IdentityService
import Testing
@testable import GatehouseApp

@Suite("Password reset configuration")
struct PasswordResetConfigTests {
    func settings(_ values: [String: String]) throws -> PasswordResetSettings {
        let environment = ["GATEHOUSE_ALLOW_PLAINTEXT": "true"].merging(values) { _, new in new }
        return try IdentityRoleSettings(config: Config(environment: environment)).service.passwordReset
    }

    func expectRefused(_ key: String, _ value: String) {
        #expect {
            try settings([key: value])
        } throws: { error in
            (error as? ConfigError)?.message.contains(key) == true
        }
    }

    @Test("defaults: 3600 s, Gatehouse, no-reply@localhost, links to the gateway's pages, 1 a minute and 5 an hour")
    func defaults() throws {
        var expected = PasswordResetSettings()
        expected.linkBase = "http://127.0.0.1:8080/actions"
        #expect(try settings([:]) == expected)
        #expect(try settings(["GATEHOUSE_PUBLIC_URL": "https://auth.example.com/"]).linkBase == "https://auth.example.com/actions")
        #expect(try settings(["GATEHOUSE_MAIL_LINK_BASE": "none"]).linkBase == nil)
        let d = PasswordResetSettings()
        #expect(d.ttl == 3600 && d.appName == "Gatehouse" && d.from == "Gatehouse <no-reply@localhost>" && d.linkBase == nil)
        #expect(d.perMinute == 1 && d.perHour == 5)
    }

    @Test("values are read and checked, a bad one names its key")
    func values() throws {
        let s = try settings([
            "GATEHOUSE_PASSWORD_RESET_TTL": "900", "GATEHOUSE_APP_NAME": "さくら", "GATEHOUSE_MAIL_FROM": "Sakura <auth@sakura.example>",
            "GATEHOUSE_MAIL_LINK_BASE": "https://sakura.example/auth",
        ])
        #expect(s.ttl == 900 && s.appName == "さくら" && s.from == "Sakura <auth@sakura.example>" && s.linkBase == "https://sakura.example/auth")
        expectRefused("GATEHOUSE_PASSWORD_RESET_TTL", "60")
        expectRefused("GATEHOUSE_PASSWORD_RESET_TTL", "1h")
        expectRefused("GATEHOUSE_MAIL_FROM", "nobody")
        expectRefused("GATEHOUSE_MAIL_FROM", "Evil <a@b>\r\nBcc: x@y")
        expectRefused("GATEHOUSE_MAIL_LINK_BASE", "ftp://example.com")
        expectRefused("GATEHOUSE_APP_NAME", String(repeating: "x", count: 65))
    }

    @Test("email verification and change: defaults, values, and a bad one names its key")
    func emailFlows() throws {
        func flows(_ values: [String: String]) throws -> EmailFlowSettings {
            let environment = ["GATEHOUSE_ALLOW_PLAINTEXT": "true"].merging(values) { _, new in new }
            return try IdentityRoleSettings(config: Config(environment: environment)).service.emailFlows
        }
        #expect(try flows([:]) == EmailFlowSettings())
        let s = try flows([
            "GATEHOUSE_EMAIL_VERIFICATION": "Required", "GATEHOUSE_EMAIL_VERIFICATION_TTL": "600", "GATEHOUSE_EMAIL_CHANGE_TTL": "900",
            "GATEHOUSE_EMAIL_REVERT_TTL": "86400",
        ])
        #expect(s.verification == .required && s.verificationTTL == 600 && s.changeTTL == 900 && s.revertTTL == 86_400)
        for (key, value) in [
            ("GATEHOUSE_EMAIL_VERIFICATION", "maybe"), ("GATEHOUSE_EMAIL_VERIFICATION_TTL", "10"),
            ("GATEHOUSE_EMAIL_CHANGE_TTL", "100000"), ("GATEHOUSE_EMAIL_REVERT_TTL", "60"),
        ] {
            #expect {
                try flows([key: value])
            } throws: { error in
                (error as? ConfigError)?.message.contains(key) == true
            }
        }
    }

    @Test("the gateway's GATEHOUSE_RATE_LIMIT_PASSWORD_RESET: 10/h burst=5 by default, off or a limit")
    func rateLimit() throws {
        let defaults = try GatewayRoleSettingsProbe.limits([:])
        #expect(defaults.limits[.passwordReset] == RateLimit(perSecond: 10.0 / 3600, burst: 5))
        #expect(try GatewayRoleSettingsProbe.limits(["GATEHOUSE_RATE_LIMIT_PASSWORD_RESET": "off"]).limits[.passwordReset] == nil)
        #expect {
            try GatewayRoleSettingsProbe.limits(["GATEHOUSE_RATE_LIMIT_PASSWORD_RESET": "lots"])
        } throws: { error in
            (error as? ConfigError)?.message.contains("GATEHOUSE_RATE_LIMIT_PASSWORD_RESET") == true
        }
    }
}

/// `GatewayRole.rateLimits` over an environment.
enum GatewayRoleSettingsProbe {
    static func limits(_ environment: [String: String]) throws -> RateLimits {
        try GatewayRoleSettings.rateLimits(Config(environment: environment))
    }
}
