import Foundation
import GatehouseTestSupport
import PostgresSupport
import Testing
import TokenService
@testable import GatehouseApp

/// Settings of several instances and of a shared database (issue 24).
@Suite("Configuration: several instances")
struct SeveralInstancesConfigTests {
    @Test("a service's URL may list its instances; a bad, repeated or empty list is refused with the key named")
    func endpointLists() throws {
        let two = try Config(environment: ["GATEHOUSE_TOKEN_URL": "tcp://10.0.0.1:7011, tcp://10.0.0.2:7011"])
        #expect(Config.splitEndpoints(try two.endpoints(ConfigTable.tokenURL)) == ["tcp://10.0.0.1:7011", "tcp://10.0.0.2:7011"])
        for bad in ["tcp://a:1,http://b:2", "tcp://a:1,tcp://a:1", " , ", Array(repeating: "tcp://a:", count: 17).enumerated().map { "\($1)\($0)" }.joined(separator: ",")] {
            let config = try Config(environment: ["GATEHOUSE_TOKEN_URL": bad])
            #expect(throws: ConfigError.self) { try config.endpoints(ConfigTable.tokenURL) }
            do { _ = try config.endpoints(ConfigTable.tokenURL) } catch let error as ConfigError { #expect(error.message.contains("GATEHOUSE_TOKEN_URL")) }
        }
    }

    @Test("every instance of a list is a link: plain text to any of them needs the same consent as to one")
    func linksOfAList() throws {
        let config = try Config(environment: ["GATEHOUSE_TOKEN_URL": "tcp://127.0.0.1:7011,tcp://127.0.0.1:7021"])
        do {
            _ = try LinkSecurity.load(config, role: .gateway, links: [.init(ConfigTable.tokenURL, "tcp://127.0.0.1:7011,tcp://127.0.0.1:7021", binds: false)])
            Issue.record("plain text accepted")
        } catch let error as ConfigError {
            #expect(error.message.contains("GATEHOUSE_TOKEN_URL") && error.message.contains("tcp://127.0.0.1:7011"))
        }
        let allowed = try Config(environment: ["GATEHOUSE_ALLOW_PLAINTEXT": "true"])
        let links = try LinkSecurity.load(
            allowed, role: .gateway, links: [.init(ConfigTable.tokenURL, "tcp://127.0.0.1:7011,tcp://127.0.0.1:7021", binds: false)])
        #expect(links.warnings.count == 1 && links.warnings[0].contains("tcp://127.0.0.1:7021"))
    }

    @Test("GATEHOUSE_TOKEN_DATABASE_URL selects PostgreSQL; a bad URL is refused naming the key and never echoing the password")
    func tokenDatabase() throws {
        #expect(try DatabaseSettings.token(try Config(environment: [:])) == nil)
        let folder = try TemporaryDirectory(prefix: "db-config").url
        let passwordFile = folder.appendingPathComponent("password")
        try "from-file\n".write(to: passwordFile, atomically: true, encoding: .utf8)
        let config = try Config(environment: [
            "GATEHOUSE_TOKEN_DATABASE_URL": "postgres://gatehouse@db.internal:6432/auth", "GATEHOUSE_DATABASE_PASSWORD_FILE": passwordFile.path,
            "GATEHOUSE_DATABASE_POOL_SIZE": "8", "GATEHOUSE_KEY_SYNC_INTERVAL": "5",
        ])
        let settings = try #require(try DatabaseSettings.token(config))
        #expect(settings.postgres.host == "db.internal" && settings.postgres.port == 6432 && settings.postgres.database == "auth")
        #expect(settings.postgres.password == "from-file" && settings.postgres.tls == .verifyFull)
        #expect(settings.poolSize == 8 && settings.keySyncInterval == 5)
        var shared = [
            "GATEHOUSE_DATA_DIR": folder.path, "GATEHOUSE_TOKEN_DATABASE_URL": "postgres://gatehouse@127.0.0.1/auth", "GATEHOUSE_KEY_SYNC_INTERVAL": "5",
            "GATEHOUSE_ALLOW_PLAINTEXT": "true",
        ]
        // Every instance must seal and open the shared keys with one configured key.
        do {
            _ = try TokenRoleSettings(config: try Config(environment: shared))
            Issue.record("a shared store without a configured key-encryption key was accepted")
        } catch let error as ConfigError {
            #expect(error.message.contains("GATEHOUSE_KEY_ENCRYPTION_KEY_FILE"))
        }
        let kek = folder.appendingPathComponent("kek")
        try Data(repeating: 9, count: 32).write(to: kek)
        shared["GATEHOUSE_KEY_ENCRYPTION_KEY_FILE"] = kek.path
        let role = try TokenRoleSettings(config: try Config(environment: shared))
        #expect(role.service.keySyncInterval == 5 && role.service.keyActivationDelay == 11)
        let sqlite = try TokenRoleSettings(config: try Config(environment: ["GATEHOUSE_DATA_DIR": folder.path, "GATEHOUSE_ALLOW_PLAINTEXT": "true"]))
        #expect(sqlite.database == nil && sqlite.service.keyActivationDelay == 0 && sqlite.service.keySyncInterval == nil)
        for (key, value) in [
            ("GATEHOUSE_TOKEN_DATABASE_URL", "mysql://u:hunter2@h/db"), ("GATEHOUSE_TOKEN_DATABASE_URL", "postgres://u:hunter2@h/db?sslmode=sometimes"),
            ("GATEHOUSE_DATABASE_POOL_SIZE", "1"), ("GATEHOUSE_KEY_SYNC_INTERVAL", "61"),
        ] {
            var environment = ["GATEHOUSE_TOKEN_DATABASE_URL": "postgres://u:hunter2@h/db"]
            environment[key] = value
            do {
                _ = try DatabaseSettings.token(try Config(environment: environment))
                Issue.record("\(key)=\(value) accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains(key) && !error.message.contains("hunter2"))
            }
        }
    }

    @Test("GATEHOUSE_IDENTITY_DATABASE_URL selects PostgreSQL for the identity role, apart from the token's; a bad URL or a pool under 6 is refused naming the key")
    func identityDatabase() throws {
        let folder = try TemporaryDirectory(prefix: "db-config").url
        let base = ["GATEHOUSE_DATA_DIR": folder.path, "GATEHOUSE_ALLOW_PLAINTEXT": "true"]
        #expect(try IdentityRoleSettings(config: try Config(environment: base)).database == nil)
        // The token's URL does not move the identity store.
        #expect(try IdentityRoleSettings(config: try Config(environment: base.merging(["GATEHOUSE_TOKEN_DATABASE_URL": "postgres://u@h/db"]) { $1 })).database == nil)
        let role = try IdentityRoleSettings(config: try Config(environment: base.merging([
            "GATEHOUSE_IDENTITY_DATABASE_URL": "postgres://gatehouse@db.internal:6432/auth?sslmode=require", "GATEHOUSE_DATABASE_POOL_SIZE": "6",
        ]) { $1 }))
        let settings = try #require(role.database)
        #expect(settings.postgres.host == "db.internal" && settings.postgres.port == 6432 && settings.postgres.database == "auth")
        #expect(settings.postgres.tls == .require && settings.poolSize == 6)
        for (key, value) in [
            ("GATEHOUSE_IDENTITY_DATABASE_URL", "mysql://u:hunter2@h/db"), ("GATEHOUSE_DATABASE_POOL_SIZE", "5"),
        ] {
            var environment = base.merging(["GATEHOUSE_IDENTITY_DATABASE_URL": "postgres://u:hunter2@h/db"]) { $1 }
            environment[key] = value
            do {
                _ = try IdentityRoleSettings(config: try Config(environment: environment))
                Issue.record("\(key)=\(value) accepted")
            } catch let error as ConfigError {
                #expect(error.message.contains(key) && !error.message.contains("hunter2"), "\(error.message)")
            }
        }
    }
}
