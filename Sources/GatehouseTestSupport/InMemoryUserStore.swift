import Foundation
import GatehouseSupport
import IdentityCore
import IdentityService

/// A `UserStore` in memory, for tests. Obeys the same contract as `SQLiteUserStore`
/// (the shared contract suite runs against both), including its size invariants.
public actor InMemoryUserStore: UserStore {
    private var users: [UserID: UserRecord] = [:]
    private var byEmail: [String: UserID] = [:]
    private var identities: [String: UserID] = [:]
    /// The session activity the anonymous sweep recorded (`recordSessionActivity`).
    private var sessionActivity: [UserID: Date] = [:]

    /// An empty store.
    public init() {}

    /// Adds `user`; refuses a taken id or email, or a record breaking the schema's invariants.
    public func insert(_ user: UserRecord) async throws {
        try Self.checkInvariants(user)
        guard users[user.id] == nil else { throw IdentityError.storage(cause: "duplicate id") }
        if let email = user.emailNormalized, byEmail[email] != nil { throw IdentityError.emailExists }
        users[user.id] = Self.rounded(user)
        if let email = user.emailNormalized { byEmail[email] = user.id }
    }

    /// The user with `id`, if any.
    public func user(id: UserID) async throws -> UserRecord? { users[id] }

    /// The user whose normalized email is `normalizedEmail`, if any.
    public func user(normalizedEmail: String) async throws -> UserRecord? {
        byEmail[normalizedEmail].flatMap { users[$0] }
    }

    /// Applies `change` to the user (checking `expectedVersion` when given), bumping its version and `updatedAt`.
    public func update(
        id: UserID, expectedVersion: Int64?, now: Date, _ change: @escaping @Sendable (inout UserRecord) throws -> Void
    ) async throws -> UserRecord {
        guard let old = users[id] else { throw IdentityError.userNotFound }
        if let expectedVersion, expectedVersion != old.version { throw IdentityError.versionConflict(current: old.version) }
        var user = old
        try change(&user)
        user.id = id
        user.version = old.version + 1
        user.updatedAt = now
        user = Self.rounded(user)
        try Self.checkInvariants(user)
        if let email = user.emailNormalized, email != old.emailNormalized, byEmail[email] != nil {
            throw IdentityError.emailExists
        }
        if let email = old.emailNormalized { byEmail[email] = nil }
        if let email = user.emailNormalized { byEmail[email] = id }
        users[id] = user
        return user
    }

    /// Records a sign-in at `at`, replacing the password hash when `newPasswordHash` is set and
    /// the stored one is still `replacing`.
    public func recordSignIn(id: UserID, at: Date, newPasswordHash: String?, replacing: String?) async throws {
        guard var user = users[id] else { throw IdentityError.userNotFound }
        user.lastSignInAt = at.roundedToMilliseconds
        if let newPasswordHash, user.passwordHash == replacing { user.passwordHash = newPasswordHash }
        users[id] = user
    }

    /// Removes the user and its linked identities.
    public func delete(id: UserID) async throws {
        guard let user = users.removeValue(forKey: id) else { throw IdentityError.userNotFound }
        if let email = user.emailNormalized { byEmail[email] = nil }
        identities = identities.filter { $0.value != id }
    }

    /// Links the external identity `provider`/`subject` to `user`.
    public func linkIdentity(provider: String, subject: String, to user: UserID, at: Date) async throws {
        guard (1...64).contains(provider.count), (1...255).contains(subject.count) else {
            throw IdentityError.invalidArgument(field: "user", reason: "breaks a storage invariant")
        }
        guard users[user] != nil else { throw IdentityError.userNotFound }
        let key = Self.identityKey(provider, subject)
        guard identities[key] == nil else {
            throw IdentityError.invalidArgument(field: "identity", reason: "already linked to a user")
        }
        identities[key] = user
        users[user]?.linkedProviders = Set(identities.filter { $0.value == user }.keys.map(Self.provider(ofKey:))).sorted()
    }

    /// The user linked to `provider`/`subject`, if any.
    public func userID(provider: String, subject: String) async throws -> UserID? {
        identities[Self.identityKey(provider, subject)]
    }

    /// How many users the store holds.
    public func count() async throws -> Int { users.count }

    /// The provider part of an `identityKey`.
    private static func provider(ofKey key: String) -> String {
        let bytes = Array(key.utf8)
        guard let colon = bytes.firstIndex(of: 0x3A), let length = Int(String(decoding: bytes[..<colon], as: UTF8.self)) else { return "" }
        return String(decoding: bytes[(colon + 1)..<min(bytes.count, colon + 1 + length)], as: UTF8.self)
    }

    private static func identityKey(_ provider: String, _ subject: String) -> String {
        "\(provider.utf8.count):\(provider)\(subject)"
    }

    private static func rounded(_ user: UserRecord) -> UserRecord {
        var user = user
        user.createdAt = user.createdAt.roundedToMilliseconds
        user.updatedAt = user.updatedAt.roundedToMilliseconds
        user.lastSignInAt = user.lastSignInAt?.roundedToMilliseconds
        user.tokensValidAfter = user.tokensValidAfter?.roundedToMilliseconds
        return user
    }

    /// The CHECK constraints of the SQLite schema.
    private static func checkInvariants(_ u: UserRecord) throws {
        let violated = IdentityError.invalidArgument(field: "user", reason: "breaks a storage invariant")
        guard (22...64).contains(u.id.rawValue.count) else { throw violated }
        guard (u.email == nil) == (u.emailNormalized == nil), u.isAnonymous || u.emailNormalized != nil else { throw violated }
        if let e = u.email, !(3...254).contains(e.utf8.count) { throw violated }
        if let e = u.emailNormalized, !(3...254).contains(e.utf8.count) { throw violated }
        if let d = u.displayName, d.unicodeScalars.count > 256 { throw violated }
        if let p = u.photoURL, p.unicodeScalars.count > 2048 { throw violated }
        if let h = u.passwordHash, h.unicodeScalars.count > 1024 { throw violated }
        if !u.customClaimsJSON.isEmpty {
            guard u.customClaimsJSON.utf8.count <= UserRecord.maxCustomClaimsBytes, Self.isObject(u.customClaimsJSON) else { throw violated }
        }
        guard u.settingsJSON.utf8.count <= UserRecord.maxSettingsBytes, Self.isObject(u.settingsJSON) else { throw violated }
        guard u.version >= 1 else { throw violated }
    }
}

extension InMemoryUserStore: AnonymousSweepStore {
    /// The latest of the user's creation, last sign-in and recorded session activity.
    private func activity(of user: UserRecord) -> Date {
        max(user.createdAt, user.lastSignInAt ?? .distantPast, sessionActivity[user.id] ?? .distantPast)
    }

    /// Anonymous users last active before `cutoff`, least recently active first, at most `limit`.
    public func anonymousCandidates(inactiveBefore cutoff: Date, limit: Int) async throws -> [AnonymousCandidate] {
        let cutoff = cutoff.roundedToMilliseconds
        return users.values.filter { $0.isAnonymous }
            .map { AnonymousCandidate(id: $0.id, lastActivity: activity(of: $0)) }
            .filter { $0.lastActivity < cutoff }
            .sorted { ($0.lastActivity, $0.id.rawValue) < ($1.lastActivity, $1.id.rawValue) }
            .prefix(max(0, limit)).map { $0 }
    }

    /// Keeps the later of the recorded session activity and the one given, for known users.
    public func recordSessionActivity(_ activity: [UserID: Date]) async throws {
        for (id, at) in activity where users[id] != nil {
            sessionActivity[id] = max(sessionActivity[id] ?? .distantPast, at.roundedToMilliseconds)
        }
    }

    /// Deletes the user if it is still anonymous and inactive since before `cutoff`.
    public func deleteAnonymous(id: UserID, inactiveBefore cutoff: Date) async throws -> Bool {
        guard let user = users[id], user.isAnonymous, activity(of: user) < cutoff.roundedToMilliseconds else { return false }
        try await delete(id: id)
        sessionActivity[id] = nil
        return true
    }
}

extension InMemoryUserStore {
    /// Whether `text` is a JSON object, as SQLite's `json_valid` and `json_type` (the CHECK on
    /// claims and settings) judge it: any depth.
    static func isObject(_ text: String) -> Bool {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) is [String: Any]
    }
}
