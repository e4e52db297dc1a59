import Foundation

/// The configuration keys of mail delivery's robustness (issue 19 part 2, F4).
extension ConfigTable {
    /// The longest one delivery may take.
    public static let mailDeliveryTimeout = ConfigKey(env: "GATEHOUSE_MAIL_DELIVERY_TIMEOUT", defaultValue: "60", secret: false, range: 5...600, roles: "serve, identity", help: "Seconds one delivery may take as a whole (5–600), however slowly the relay answers each command: then the connection is closed and the attempt is retried later like any transient failure.")

    /// The keys above, in `ConfigTable.all`.
    static let mailDeliveryKeys = [mailDeliveryTimeout]
}
