import Foundation

/// The configuration keys of the audit log (issue 22 §3).
extension ConfigTable {
    /// How long both services keep an audit event.
    public static let auditRetention = ConfigKey(env: "GATEHOUSE_AUDIT_RETENTION", defaultValue: "7776000", secret: false, range: 3600...157_680_000, roles: "serve, identity, token", help: "Seconds the identity and token services keep an audit event (3600–157680000; 90 days); older ones are pruned in the background.")

    /// The admin listener's address.
    public static let adminHost = ConfigKey(env: "GATEHOUSE_ADMIN_HOST", defaultValue: "127.0.0.1", secret: false, roles: "serve, identity", help: "Address the admin API listens on (issue 22: /admin/v1, admin API keys); loopback by default. Never the public gateway's port.")
    /// The admin listener's port.
    public static let adminPort = ConfigKey(env: "GATEHOUSE_ADMIN_PORT", defaultValue: "8081", secret: false, range: 0...65_535, roles: "serve, identity", help: "Port the admin API listens on; 0 turns the admin listener off.")
    /// Where `gatehouse users` and `gatehouse admin` reach the admin API.
    public static let adminURL = ConfigKey(env: "GATEHOUSE_ADMIN_URL", defaultValue: "http://127.0.0.1:8081", secret: false, roles: "cli", help: "Base URL of the admin API for `gatehouse users ...` (list, get, create, update, disable, enable, delete, revoke-sessions, set-claims) and `gatehouse keys rotate-signing`.")
    /// The admin API key the CLI presents.
    public static let adminKey = ConfigKey(env: "GATEHOUSE_ADMIN_KEY", defaultValue: nil, secret: true, roles: "cli", help: "Admin API key (gha_<id>.<secret>) that `gatehouse users ...` presents; made by `gatehouse admin keys create`. Use the environment or GATEHOUSE_ADMIN_KEY_FILE, not the flag: a flag shows in the process list.")
    /// A file holding the admin API key.
    public static let adminKeyFile = ConfigKey(env: "GATEHOUSE_ADMIN_KEY_FILE", defaultValue: nil, secret: false, roles: "cli", help: "File holding the admin API key, instead of GATEHOUSE_ADMIN_KEY.")

    /// The keys above, in `ConfigTable.all`.
    static let auditKeys = [auditRetention, adminHost, adminPort, adminURL, adminKey, adminKeyFile]
}
