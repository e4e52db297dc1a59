import Foundation
import GatehouseContracts
import IdentityCore
import GatehouseSupport

/// The log's `user` JSON (`SQLiteUserStore.changeLogUserJSON`; public for `PostgresUserStore`,
/// whose triggers write the same shape).
public struct LoggedUser: Decodable {
    var id: String
    var email: String?
    var emailNormalized: String?
    var emailVerified: Int
    var displayName: String?
    var photoURL: String?
    var hasPassword: Int
    var isAnonymous: Int
    var disabled: Int
    var customClaims: String
    var settings: String
    var createdAt: Int64
    var updatedAt: Int64
    var lastSignInAt: Int64?
    var tokensValidAfter: Int64?
    var version: Int64
    var providers: String

    /// The user a `user` JSON of the change log holds (its password hash only as "has one").
    public static func decode(_ json: String) throws -> UserRecord {
        let logged = try JSONDecoder().decode(LoggedUser.self, from: Data(json.utf8))
        var user = UserRecord(id: UserID(rawValue: logged.id), email: nil, createdAt: Date(millisecondsSince1970: logged.createdAt))
        user.email = logged.email
        user.emailNormalized = logged.emailNormalized
        user.emailVerified = logged.emailVerified != 0
        user.displayName = logged.displayName
        user.photoURL = logged.photoURL
        // Only whether there is one (it makes the `password` provider); the hash is never logged.
        user.passwordHash = logged.hasPassword != 0 ? "" : nil
        user.isAnonymous = logged.isAnonymous != 0
        user.disabled = logged.disabled != 0
        user.customClaimsJSON = logged.customClaims
        user.settingsJSON = logged.settings
        user.updatedAt = Date(millisecondsSince1970: logged.updatedAt)
        user.lastSignInAt = logged.lastSignInAt.map(Date.init(millisecondsSince1970:))
        user.tokensValidAfter = logged.tokensValidAfter.map(Date.init(millisecondsSince1970:))
        user.version = logged.version
        user.linkedProviders = logged.providers.isEmpty ? [] : logged.providers.split(separator: ",").map(String.init)
        return user
    }
}
