import Foundation
import GatehouseContracts

// One record of an import file as an `ImportedUser`, and the jsonl line `gatehouse users export`
// writes for one: the same fields both ways, so an export imports again.
extension UserImportFile {
    /// The fields of a jsonl line.
    public static let jsonlFields: Set<String> = [
        "id", "email", "emailVerified", "displayName", "photoURL", "passwordHash", "providers", "customClaims", "disabled", "createdAt",
    ]

    static func object(_ bytes: [UInt8]) throws -> [String: Any] {
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: Data(bytes)) } catch {
            throw ImportLineError("not JSON")
        }
        guard let object = parsed as? [String: Any] else { throw ImportLineError("not a JSON object") }
        return object
    }

    /// A jsonl line as a user; unknown fields and wrong types are refused.
    static func jsonlUser(_ bytes: [UInt8]) throws -> ImportedUser {
        let object = try object(bytes)
        if let unknown = object.keys.sorted().first(where: { !jsonlFields.contains($0) }) {
            throw ImportLineError("unknown field \(unknown) (fields: \(jsonlFields.sorted().joined(separator: ", ")))")
        }
        let fields = Fields(object)
        var user = ImportedUser()
        user.id = try fields.string("id")
        user.email = try fields.string("email")
        user.emailVerified = try fields.bool("emailVerified")
        user.displayName = try fields.string("displayName")
        user.photoURL = try fields.string("photoURL")
        user.passwordHash = try fields.string("passwordHash")
        user.providers = try fields.strings("providers")
        user.customClaimsJSON = try fields.json("customClaims")
        user.disabled = try fields.bool("disabled")
        if let text = try fields.string("createdAt") {
            guard let date = parseISO8601(text) else { throw ImportLineError("createdAt must be an ISO 8601 time, e.g. 2024-05-01T12:00:00Z") }
            user.createdAt = date
        }
        return user
    }

    /// A user object of a `firebase auth:export` file as a user; its password (`passwordHash`,
    /// `salt`) becomes the `$firebase-scrypt$` form with the project's `parameters`.
    static func firebaseUser(_ bytes: [UInt8], parameters: FirebaseHashParameters?) throws -> ImportedUser {
        let fields = Fields(try object(bytes))
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

    /// The jsonl line of an exported user (without the newline).
    public static func jsonlLine(_ user: ImportedUser) -> String {
        var object: [String: Any] = ["emailVerified": user.emailVerified, "disabled": user.disabled, "providers": user.providers]
        if let id = user.id { object["id"] = id }
        if let email = user.email { object["email"] = email }
        if let name = user.displayName { object["displayName"] = name }
        if let photo = user.photoURL { object["photoURL"] = photo }
        if let hash = user.passwordHash { object["passwordHash"] = hash }
        if let claims = user.customClaimsJSON, let parsed = try? JSONSerialization.jsonObject(with: Data(claims.utf8)) { object["customClaims"] = parsed }
        if let created = user.createdAt { object["createdAt"] = formatISO8601(created) }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    static func parseISO8601(_ text: String) -> Date? {
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = fractional.date(from: text) { return date }
        return ISO8601DateFormatter().date(from: text)
    }

    static func formatISO8601(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}

/// Typed reads of a JSON object's members: absent and `null` are nil, a wrong type is refused
/// naming the field.
struct Fields {
    let object: [String: Any]
    init(_ object: [String: Any]) { self.object = object }

    func string(_ name: String) throws -> String? {
        guard let value = object[name], !(value is NSNull) else { return nil }
        guard let text = value as? String else { throw ImportLineError("\(name) must be a string") }
        return text
    }

    func bool(_ name: String) throws -> Bool {
        guard let value = object[name], !(value is NSNull) else { return false }
        guard let flag = value as? Bool else { throw ImportLineError("\(name) must be true or false") }
        return flag
    }

    func strings(_ name: String) throws -> [String] {
        guard let value = object[name], !(value is NSNull) else { return [] }
        guard let list = value as? [String] else { throw ImportLineError("\(name) must be an array of strings") }
        return list
    }

    /// A JSON object member, as compact JSON text (an object, or a string holding one).
    func json(_ name: String) throws -> String? {
        guard let value = object[name], !(value is NSNull) else { return nil }
        if let text = value as? String { return text }
        guard value is [String: Any], let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]) else {
            throw ImportLineError("\(name) must be a JSON object")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
