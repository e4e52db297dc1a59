import Foundation
import GatehouseContracts
import UserTransfer

// A user of a `firebase auth:export` file as an `ImportedUser` (the jsonl form is `UserJSONL`).
extension UserImportFile {
    /// A user object of a `firebase auth:export` file as a user; its password (`passwordHash`,
    /// `salt`) becomes the `$firebase-scrypt$` form with the project's `parameters`.
    static func firebaseUser(_ bytes: [UInt8], parameters: FirebaseHashParameters?) throws -> ImportedUser {
        let fields = Fields(try UserJSONL.object(bytes))
        var user = ImportedUser()
        user.id = try fields.string("localId")
        user.email = try fields.string("email")
        user.emailVerified = try fields.bool("emailVerified")
        user.displayName = try fields.string("displayName")
        user.photoURL = try fields.string("photoUrl")
        user.disabled = try fields.bool("disabled")
        if let attributes = try fields.string("customAttributes"), !attributes.isEmpty { user.customClaimsJSON = attributes }
        if let created = try fields.string("createdAt") {
            guard let ms = Int64(created) else { throw ImportLineError("createdAt must be milliseconds since 1970, as Firebase writes it") }
            user.createdAt = Date(timeIntervalSince1970: Double(ms) / 1000)
        }
        if let infos = fields.object["providerUserInfo"] {
            guard let infos = infos as? [[String: Any]] else { throw ImportLineError("providerUserInfo must be an array of objects") }
            let ids = try infos.compactMap { try Fields($0).string("providerId") }
            user.providers = Array(Set(ids.filter { $0 != "password" })).sorted()
            // The providers Gatehouse signs in with keep the person's id there (`rawId`, the `sub`
            // of that provider's tokens), so the first sign-in with them finds the user.
            var identities: [String: ImportedIdentity] = [:]
            for info in infos {
                let fields = Fields(info)
                guard let provider = try fields.string("providerId"), provider == "google.com" || provider == "apple.com" || provider.hasPrefix("oidc."),
                    let subject = try fields.string("rawId"), !subject.isEmpty
                else { continue }
                identities[provider] = identities[provider] ?? ImportedIdentity(provider: provider, subject: subject)
            }
            user.identities = identities.values.sorted { $0.provider < $1.provider }
        }
        if let hash = try fields.string("passwordHash"), !hash.isEmpty {
            guard let parameters else {
                throw ImportLineError("the user has a password: give the project's hash parameters (--hash-key, --salt-separator, --rounds, --mem-cost)")
            }
            guard let hashBytes = FirebaseHashParameters.lenientBase64(hash),
                let salt = FirebaseHashParameters.lenientBase64(try fields.string("salt") ?? ""), !salt.isEmpty
            else {
                throw ImportLineError("passwordHash and salt must be base64, as Firebase writes them")
            }
            user.passwordHash = parameters.storedHash(salt: Array(salt), hash: Array(hashBytes))
        }
        return user
    }
}
