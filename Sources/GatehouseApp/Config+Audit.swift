import Foundation

/// The configuration keys of the audit log (issue 22 §3).
extension ConfigTable {
    /// How long both services keep an audit event.
    public static let auditRetention = ConfigKey(env: "GATEHOUSE_AUDIT_RETENTION", defaultValue: "7776000", secret: false, roles: "serve, identity, token", help: "Seconds the identity and token services keep an audit event (3600–157680000; 90 days); older ones are pruned in the background.")

    /// The keys above, in `ConfigTable.all`.
    static let auditKeys = [auditRetention]
}
