import Foundation
import GatehouseSupport
import PostgresSupport

/// The configuration keys of a shared database (issue 24): the token service on PostgreSQL, run
/// as several instances.
extension ConfigTable {
    /// The token service's PostgreSQL database.
    public static let tokenDatabaseURL = ConfigKey(env: "GATEHOUSE_TOKEN_DATABASE_URL", defaultValue: nil, secret: true, roles: "token", help: "`postgres://user@host:5432/db?sslmode=verify-full`: keep the token service's keys, sessions and refresh tokens in PostgreSQL instead of token.sqlite, so several token instances can share them. Empty: SQLite. `sslmode` is disable, prefer, require or verify-full (the default off loopback); `sslrootcert=/path` names the CA. Put the password in GATEHOUSE_DATABASE_PASSWORD_FILE, not here.")
    /// The identity service's PostgreSQL database (several identity instances); empty for SQLite.
    public static let identityDatabaseURL = ConfigKey(env: "GATEHOUSE_IDENTITY_DATABASE_URL", defaultValue: nil, secret: true, roles: "identity", help: "`postgres://user@host:5432/db?sslmode=verify-full`: keep the identity service's users, codes, outbox, change log and audit log in PostgreSQL instead of identity.sqlite, so several identity instances can share them. Empty: SQLite. Options as for GATEHOUSE_TOKEN_DATABASE_URL; it may name the same database (the stores' tables do not overlap).")
    /// A file holding the database password.
    public static let databasePasswordFile = ConfigKey(env: "GATEHOUSE_DATABASE_PASSWORD_FILE", defaultValue: nil, secret: false, roles: "token, identity", help: "A file whose first line is the PostgreSQL password: a Docker or Kubernetes secret. Takes the place of a password in the URL.")
    /// Connections each instance keeps to the database.
    public static let databasePoolSize = ConfigKey(env: "GATEHOUSE_DATABASE_POOL_SIZE", defaultValue: "16", secret: false, range: 2...200, roles: "token, identity", help: "Most connections one instance opens to PostgreSQL (2–200; an identity instance at least 6). The server's max_connections must cover every instance's pool (deploy/README.md, sizing).")
    /// How often an instance reloads the signing keys.
    public static let keySyncInterval = ConfigKey(env: "GATEHOUSE_KEY_SYNC_INTERVAL", defaultValue: "10", secret: false, range: 1...60, roles: "token", help: "With PostgreSQL: seconds (1–60) between each token instance's reloads of the signing keys. A rotated key is published at once and signs only after two intervals and a second, so every instance publishes it before any signs with it.")

    /// The keys above, in `ConfigTable.all`.
    static let databaseKeys = [tokenDatabaseURL, identityDatabaseURL, databasePasswordFile, databasePoolSize, keySyncInterval]
}

/// The shared database settings of a role.
public struct DatabaseSettings: Sendable {
    /// Where and how to connect (no password in its description).
    public var postgres: PostgresSettings
    /// Connections of this instance's pool.
    public var poolSize: Int
    /// Seconds between key reloads.
    public var keySyncInterval: Int

    /// The token role's database, or nil for SQLite (`GATEHOUSE_TOKEN_DATABASE_URL` empty).
    public static func token(_ config: Config) throws -> DatabaseSettings? {
        try settings(config, ConfigTable.tokenDatabaseURL)
    }

    /// The identity service's PostgreSQL settings (`GATEHOUSE_IDENTITY_DATABASE_URL`), or nil for SQLite.
    public static func identity(_ config: Config) throws -> DatabaseSettings? {
        try settings(config, ConfigTable.identityDatabaseURL)
    }

    static func settings(_ config: Config, _ key: ConfigKey) throws -> DatabaseSettings? {
        guard let url = config.string(key), !url.isEmpty else { return nil }
        let passwordFile = config.string(ConfigTable.databasePasswordFile).flatMap { $0.isEmpty ? nil : $0 }
        let postgres: PostgresSettings
        do { postgres = try PostgresSettings(url: url, passwordFile: passwordFile, readFile: SecretFiles.contents(atPath:)) } catch {
            throw ConfigError(message: "\(key.env) (\(key.flag)): \(error)")
        }
        return DatabaseSettings(
            postgres: postgres, poolSize: try config.int(ConfigTable.databasePoolSize),
            keySyncInterval: try config.int(ConfigTable.keySyncInterval))
    }
}
