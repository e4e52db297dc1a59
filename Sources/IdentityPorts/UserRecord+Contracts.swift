import GatehouseContracts
import IdentityCore

extension UserRecord {
    /// The claims the token service needs.
    public var claims: UserClaims {
        UserClaims(
            exists: true, disabled: disabled, email: email ?? "", emailVerified: emailVerified,
            isAnonymous: isAnonymous, customClaimsJSON: customClaimsJSON, tokensValidAfter: tokensValidAfter)
    }
}

extension User {
    /// The wire view of a stored user.
    public init(_ record: UserRecord) {
        self.init(
            id: record.id.rawValue, email: record.email ?? "", emailVerified: record.emailVerified,
            displayName: record.displayName ?? "", photoURL: record.photoURL ?? "", isAnonymous: record.isAnonymous,
            createdAt: record.createdAt, lastSignInAt: record.lastSignInAt, settingsJSON: record.settingsJSON,
            version: record.version, disabled: record.disabled, providers: record.providers)
    }
}
