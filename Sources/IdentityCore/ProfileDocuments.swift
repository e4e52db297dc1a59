import Foundation
import GatehouseSupport

/// A user's custom claims: a JSON object of at most 1,000 bytes whose members the token service
/// writes into every access token it mints for the user (from the next refresh on).
public enum CustomClaims {
    /// Names a custom claim may not use: the registered JWT claims (RFC 7519), those Gatehouse
    /// writes itself, and common OpenID Connect / OAuth ones. Every name starting with
    /// `gatehouse` (any case) is reserved too (`isReserved`).
    public static let reservedNames: Set<String> = [
        "iss", "sub", "aud", "exp", "nbf", "iat", "jti",
        "sid", "auth_time", "amr", "email", "email_verified", "is_anonymous", "azp", "acr", "nonce", "at_hash", "c_hash",
        "cnf", "scope", "typ", "client_id",
    ]

    /// Whether a custom claim may not be called `name`.
    public static func isReserved(_ name: String) -> Bool {
        reservedNames.contains(name) || name.lowercased().hasPrefix("gatehouse")
    }

    /// The custom claims to store for `json`: "" (none) for "" or `{}`, else the object in
    /// compact form. `invalidArgument` (field `claimsJSON`) for more than
    /// `UserRecord.maxCustomClaimsBytes` bytes (as given, or as stored in compact form), text that is not a JSON object, or a reserved
    /// name (named in the reason).
    public static func validated(_ json: String) throws(IdentityError) -> String {
        let field = "claimsJSON"
        let text = json.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.isEmpty { return "" }
        guard text.utf8.count <= UserRecord.maxCustomClaimsBytes else {
            throw .invalidArgument(field: field, reason: "larger than \(UserRecord.maxCustomClaimsBytes) bytes (\(text.utf8.count))")
        }
        let tree: JSONTree
        do { tree = try JSONTree(parsing: text) } catch {
            throw .invalidArgument(field: field, reason: "not JSON (\(error))")
        }
        guard let members = tree.members else {
            throw .invalidArgument(field: field, reason: "must be a JSON object, e.g. {\"role\":\"admin\"}")
        }
        if let reserved = members.first(where: { isReserved($0.name) }) {
            throw .invalidArgument(
                field: field, reason: "`\(reserved.name)` is a reserved claim name (JWT, OpenID Connect and gatehouse* names are)")
        }
        if members.isEmpty { return "" }
        // What is stored is the compact form: its size is the one the store's limit applies to.
        let stored = tree.text
        guard stored.utf8.count <= UserRecord.maxCustomClaimsBytes else {
            throw .invalidArgument(field: field, reason: "larger than \(UserRecord.maxCustomClaimsBytes) bytes once written compactly (\(stored.utf8.count))")
        }
        return stored
    }
}

/// A user's settings document: a JSON object of at most `UserRecord.maxSettingsBytes` bytes.
public enum SettingsDocument {
    /// The largest patch `merged` reads, in bytes (a patch of removals may be larger than its result).
    public static let maxPatchBytes = 64 * 1024

    /// The merge patch in `text` (RFC 7396), read and checked: a JSON object of at most
    /// `maxPatchBytes`; else `invalidArgument` (field `settings`).
    public static func patch(_ text: String) throws(IdentityError) -> JSONTree {
        guard text.utf8.count <= maxPatchBytes else {
            throw .invalidArgument(field: "settings", reason: "the patch is larger than \(maxPatchBytes / 1024) KiB")
        }
        let tree: JSONTree
        do { tree = try JSONTree(parsing: text) } catch {
            throw .invalidArgument(field: "settings", reason: "the patch is not JSON (\(error))")
        }
        guard tree.members != nil else {
            throw .invalidArgument(field: "settings", reason: "the patch must be a JSON object")
        }
        return tree
    }

    /// A whole settings document (`UpdateProfileRequest.settingsJSON`), checked by the rules a
    /// merge reads stored settings with: at most `UserRecord.maxSettingsBytes` bytes, a JSON
    /// object `JSONTree` reads (so nested at most `JSONTree.maxDepth` deep); returned as given.
    /// Else `invalidArgument` naming `field` and the reason.
    public static func validated(_ text: String, field: String = "settingsJSON") throws(IdentityError) -> String {
        guard text.utf8.count <= UserRecord.maxSettingsBytes else {
            throw .invalidArgument(field: field, reason: "larger than 16 KiB (\(UserRecord.maxSettingsBytes) bytes)")
        }
        let tree: JSONTree
        do { tree = try JSONTree(parsing: text) } catch {
            throw .invalidArgument(field: field, reason: "must be a JSON object, nested at most \(JSONTree.maxDepth) deep (\(error))")
        }
        guard tree.members != nil else {
            throw .invalidArgument(field: field, reason: "must be a JSON object, e.g. {\"theme\":\"dark\"}")
        }
        return text
    }

    /// `patch` (a JSON merge patch) applied to the stored `settings`; `invalidArgument` naming
    /// `settings` and the limit when the result is larger than `UserRecord.maxSettingsBytes`.
    /// Stored settings that `JSONTree` cannot read as an object (written before `validated`
    /// applied its rules, e.g. nested deeper than `JSONTree.maxDepth`) are never dropped:
    /// `invalidArgument` (field `settings`) says so, and the stored document stays as it is.
    public static func merged(_ patch: JSONTree, into settings: String) throws(IdentityError) -> String {
        let current: JSONTree
        do { current = try JSONTree(parsing: settings.isEmpty ? "{}" : settings) } catch {
            throw .invalidArgument(
                field: "settings",
                reason: "the stored settings cannot be merged (\(error)); replace them whole with a JSON object nested at most \(JSONTree.maxDepth) deep")
        }
        guard current.members != nil else {
            throw .invalidArgument(field: "settings", reason: "the stored settings are not a JSON object and cannot be merged; replace them whole")
        }
        let result = JSONMergePatch.apply(patch, to: current).text
        try checkSize(result)
        return result
    }

    /// `invalidArgument` naming `settings` and the limit when `json` is larger than
    /// `UserRecord.maxSettingsBytes`.
    public static func checkSize(_ json: String) throws(IdentityError) {
        let limit = UserRecord.maxSettingsBytes
        guard json.utf8.count <= limit else {
            throw .invalidArgument(
                field: "settings", reason: "would be \(json.utf8.count) bytes, more than the limit of \(limit / 1024) KiB (\(limit) bytes)")
        }
    }

    /// Checks a configured default (`GATEHOUSE_DEFAULT_SETTINGS`): a JSON object of at most
    /// `UserRecord.maxSettingsBytes` bytes; returns it in compact form, or a reason it is refused.
    public static func validDefault(_ json: String) -> Result<String, DefaultRefused> {
        let text = json.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.isEmpty { return .success("{}") }
        guard text.utf8.count <= UserRecord.maxSettingsBytes else {
            return .failure(DefaultRefused(reason: "is \(text.utf8.count) bytes, more than \(UserRecord.maxSettingsBytes) (16 KiB)"))
        }
        do {
            let tree = try JSONTree(parsing: text)
            guard tree.members != nil else { return .failure(DefaultRefused(reason: "must be a JSON object, e.g. {\"theme\":\"dark\"}")) }
            return .success(tree.text)
        } catch {
            return .failure(DefaultRefused(reason: "must be a JSON object nested at most \(JSONTree.maxDepth) deep, e.g. {\"theme\":\"dark\"} (\(error))"))
        }
    }

    /// Why a default settings document was refused.
    public struct DefaultRefused: Error, Hashable {
        /// What is wrong with it.
        public let reason: String
    }
}
