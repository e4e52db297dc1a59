import Foundation
import SQLiteStores
import SQLiteSupport
import Testing
import Gateway
import IdentityService
import TokenService
@testable import GatehouseApp

@Suite("Configuration")
struct ConfigTests {
    /// The default tcp links, allowed without keys.
    static let plain = ["GATEHOUSE_ALLOW_PLAINTEXT": "true"]

    @Test("defaults, environment, and flags overriding the environment")
    func layering() throws {
        let config = try Config(
            environment: ["GATEHOUSE_HTTP_PORT": "9000", "GATEHOUSE_AUDIENCE": "env-aud", "UNRELATED": "x"],
            arguments: ["--http-port", "9100", "--log-level=debug"])
        #expect(try config.int(ConfigTable.httpPort, in: 1...65535) == 9100)
        #expect(config.string(ConfigTable.audience) == "env-aud")
        #expect(config.string(ConfigTable.logLevel) == "debug")
        #expect(config.string(ConfigTable.dataDir) == "./.gatehouse")
    }

    @Test("an invalid or unknown value stops start-up with a message naming the key")
    func errors() throws {
        let bad = try Config(environment: ["GATEHOUSE_HTTP_PORT": "eighty"])
        #expect(throws: ConfigError.self) { try bad.int(ConfigTable.httpPort, in: 1...65535) }
        do {
            _ = try bad.int(ConfigTable.httpPort, in: 1...65535)
        } catch let error as ConfigError {
            #expect(error.message.contains("GATEHOUSE_HTTP_PORT"))
            #expect(error.message.contains("--http-port"))
        }
        #expect(throws: ConfigError.self) { try Config(arguments: ["--no-such-flag", "1"]) }
        #expect(throws: ConfigError.self) { try Config(arguments: ["--http-port"]) }
        let endpoint = try Config(environment: ["GATEHOUSE_TOKEN_URL": "http://x"])
        #expect(throws: ConfigError.self) { try endpoint.endpoint(ConfigTable.tokenURL) }
        let flag = try Config(environment: ["GATEHOUSE_ALLOW_PLAINTEXT": "maybe"])
        #expect(throws: ConfigError.self) { try flag.bool(ConfigTable.allowPlaintext) }
    }

    @Test("the removed GATEHOUSE_TRUST_FORWARDED_FOR stops start-up when set, pointing at GATEHOUSE_TRUSTED_PROXIES")
    func removedTrustForwardedFor() throws {
        do {
            _ = try Config(environment: ["GATEHOUSE_TRUST_FORWARDED_FOR": "true"])
            Issue.record("accepted")
        } catch let error as ConfigError {
            #expect(error.message.contains("GATEHOUSE_TRUSTED_PROXIES"))
        }
        _ = try Config(environment: ["GATEHOUSE_TRUST_FORWARDED_FOR": "false"])
        #expect(throws: ConfigError.self) { try Config(arguments: ["--trust-forwarded-for", "true"]) }
    }

    @Test("trusted proxies, per-address limits and the account throttle are read, and bad values name their key")
    func limits() throws {
        let defaults = try GatewayRoleSettings(config: Config(environment: Self.plain)).gateway
        #expect(defaults.trustedProxies.isEmpty)
        #expect(defaults.rateLimits == .defaults)
        let config = try Config(environment: [
            "GATEHOUSE_TRUSTED_PROXIES": "10.0.0.0/8, 2001:db8::1", "GATEHOUSE_RATE_LIMIT_SIGN_IN": "5/s burst=7",
            "GATEHOUSE_RATE_LIMIT_REFRESH": "off", "GATEHOUSE_ACCOUNT_THROTTLE_FAILURES": "9", "GATEHOUSE_ACCOUNT_THROTTLE_MAX_DELAY": "60",
            "GATEHOUSE_DATA_DIR": "/tmp/x", "GATEHOUSE_ALLOW_PLAINTEXT": "true",
        ])
        let gateway = try GatewayRoleSettings(config: config).gateway
        #expect(gateway.trustedProxies == (try TrustedProxies(["10.0.0.0/8", "2001:db8::1"])))
        #expect(gateway.rateLimits.limits[.signIn] == RateLimit(perSecond: 5, burst: 7))
        #expect(gateway.rateLimits.limits[.refresh] == nil)
        #expect(gateway.rateLimits.limits[.signUp] == RateLimits.defaults.limits[.signUp])
        let throttle = try IdentityRoleSettings(config: config).service.attemptThrottle
        #expect(throttle == PasswordAttemptThrottle.Settings(threshold: 9, window: 900, baseDelay: 1, maxDelay: 60, capacity: 100_000))
        for (key, value) in [("GATEHOUSE_TRUSTED_PROXIES", "proxy.internal"), ("GATEHOUSE_RATE_LIMIT_SIGN_UP", "lots")] {
            do {
                _ = try GatewayRoleSettings(config: Config(environment: [key: value, "GATEHOUSE_ALLOW_PLAINTEXT": "true"]))
                Issue.record("\(key)=\(value) accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains(key), "\(error.message)")
            }
        }
        #expect(throws: ConfigError.self) { try IdentityRoleSettings(config: Config(environment: ["GATEHOUSE_ACCOUNT_THROTTLE_MAX_DELAY": "0", "GATEHOUSE_ALLOW_PLAINTEXT": "true"])) }
    }

    @Test("GATEHOUSE_DURABILITY: power-loss (synchronous=FULL) by default for both stores, process-crash on request, a bad value names the key")
    func durability() throws {
        #expect(try Config(environment: [:]).powerLossDurability() == true)
        #expect(try IdentityRoleSettings(config: Config(environment: Self.plain)).durability == .powerLoss)
        let crash = try Config(environment: Self.plain.merging(["GATEHOUSE_DURABILITY": "process-crash"]) { $1 })
        #expect(try TokenRoleSettings(config: crash).durability == .processCrash)
        #expect(try IdentityRoleSettings(config: crash).durability == .processCrash)
        let power = try Config(environment: Self.plain.merging(["GATEHOUSE_DURABILITY": "power-loss", "GATEHOUSE_DATA_DIR": "/tmp/x"]) { $1 })
        #expect(try TokenRoleSettings(config: power).durability == .powerLoss)
        #expect(try IdentityRoleSettings(config: power).durability == .powerLoss)
        #expect(try TokenRoleSettings(config: Config(environment: Self.plain)).durability == .powerLoss)
        let bad = try Config(arguments: ["--durability", "fsync-sometimes", "--allow-plaintext", "true"])
        #expect(throws: ConfigError.self) { try bad.powerLossDurability() }
        do { _ = try TokenRoleSettings(config: bad) } catch let error as ConfigError {
            #expect(error.message.contains("GATEHOUSE_DURABILITY"))
        }
    }

    @Test("secrets have no literal default and their values never appear in errors")
    func secrets() throws {
        for key in ConfigTable.all where key.secret {
            #expect(key.defaultValue == nil, "\(key.env) must not have a default")
        }
        let config = try Config(environment: ["GATEHOUSE_KEY_ENCRYPTION_KEY_FILE": "s3cr3t-value"])
        do {
            _ = try config.int(ConfigTable.keyEncryptionKeyFile, in: 0...1)
        } catch let error as ConfigError {
            #expect(!error.message.contains("s3cr3t-value"))
        }
    }

    @Test("docs/operators/configuration.md holds the table the key table renders, so it is never kept by hand")
    func referenceIsGenerated() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let guide = try String(contentsOf: root.appendingPathComponent("docs/operators/configuration.md"), encoding: .utf8)
        let current = try #require(ConfigReference.current(in: guide), "the guide lacks the generated table's markers")
        #expect(current == ConfigReference.table(), "run `swift run gatehouse config reference --write docs/operators/configuration.md`")
        for key in ConfigTable.all {
            #expect(current.contains("| `\(key.env)` | `\(key.flag)` |"), "the table lacks \(key.env)")
        }
        #expect(ConfigReference.splice(into: guide) == guide)
        #expect(ConfigReference.splice(into: "no markers") == nil)
    }

    @Test("an integer key's range is stated once, in its ConfigKey: Config.int checks it, the configuration guide's row states it")
    func ranges() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("docs/operators/configuration.md"), encoding: .utf8)
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| `GATEHOUSE_") }
        for key in ConfigTable.all {
            let row = rows.first { $0.hasPrefix("| `\(key.env)` |") } ?? ""
            if let range = key.rangeText {
                #expect(row.contains("Allowed: \(range)."), "the guide's row of \(key.env) must state `Allowed: \(range).`")
            } else {
                #expect(!row.contains("Allowed: "), "the guide states a range for \(key.env), which has none")
            }
        }
        #expect(ConfigTable.rpcTimeoutMs.range == 50...60_000)
        let low = try Config(environment: ["GATEHOUSE_RPC_TIMEOUT_MS": "49"])
        #expect(throws: ConfigError.self) { try low.int(ConfigTable.rpcTimeoutMs) }
        #expect(try Config(environment: ["GATEHOUSE_RPC_TIMEOUT_MS": "60000"]).int(ConfigTable.rpcTimeoutMs) == 60_000)
        #expect(try Config(environment: [:]).optionalInt(ConfigTable.hashWorkers) == nil)
        #expect(throws: ConfigError.self) { try Config(environment: ["GATEHOUSE_HASH_WORKERS": "257"]).optionalInt(ConfigTable.hashWorkers) }
    }

    @Test("GATEHOUSE_DEFAULT_SETTINGS: a JSON object of at most 16 KiB, else start-up stops naming the key")
    func defaultSettings() throws {
        let good = try IdentityRoleSettings(config: Config(environment: Self.plain.merging(["GATEHOUSE_DEFAULT_SETTINGS": #" {"theme": "dark"} "#]) { $1 }))
        #expect(good.service.defaultSettingsJSON == #"{"theme":"dark"}"#)
        #expect(try IdentityRoleSettings(config: Config(environment: Self.plain)).service.defaultSettingsJSON == "{}")
        for bad in ["[1]", "{theme:dark}", #"{"a":"\#(String(repeating: "x", count: 16_384))"}"#] {
            do {
                _ = try IdentityRoleSettings(config: Config(environment: Self.plain.merging(["GATEHOUSE_DEFAULT_SETTINGS": bad]) { $1 }))
                Issue.record("accepted \(bad.prefix(20))")
            } catch let error as ConfigError {
                #expect(error.message.contains("GATEHOUSE_DEFAULT_SETTINGS") && error.message.contains("--default-settings"), "\(error.message)")
            }
        }
    }

    @Test("gatehouse users: plain tcp needs GATEHOUSE_ALLOW_PLAINTEXT, as for the roles")
    func adminClientLinks() async throws {
        #expect(throws: ConfigError.self) { try AdminClient(config: Config(environment: [:])) }
        let client = try AdminClient(config: Config(environment: Self.plain))
        #expect(client.endpoint == "tcp://127.0.0.1:7001")
        await client.close()
    }
}
