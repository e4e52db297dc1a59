import Foundation

#if canImport(Security)
import Security
#endif

/// Where a `GatehouseClient` keeps the session between launches. `save` is called with the
/// rotated refresh token before the new access token is handed out, so a crash never leaves
/// the app holding only a used refresh token; a `save` that throws fails the call.
public protocol TokenStore: Sendable {
    /// The saved session, nil when there is none.
    func load() throws -> StoredSession?
    /// Saves `session`, replacing any other.
    func save(_ session: StoredSession) throws
    /// Removes the saved session.
    func clear() throws
}

/// A session kept in memory only: gone when the process ends (tests, previews, app extensions
/// that must not persist).
public final class InMemoryTokenStore: TokenStore, @unchecked Sendable {
    private let lock = NSLock()
    private var session: StoredSession?

    /// An empty store, or one holding `session`.
    public init(_ session: StoredSession? = nil) { self.session = session }

    /// The session held, if any.
    public func load() throws -> StoredSession? { lock.withLock { session } }

    /// Holds `session`.
    public func save(_ session: StoredSession) throws { lock.withLock { self.session = session } }

    /// Forgets the session.
    public func clear() throws { lock.withLock { session = nil } }
}

/// A session kept in a JSON file only its owner can read or write (mode 0600), replaced
/// atomically: a command-line tool, a server-side app, Linux.
public final class FileTokenStore: TokenStore, @unchecked Sendable {
    /// The file.
    public let url: URL
    private let lock = NSLock()

    /// A store in the file at `url` (its folder must exist).
    public init(url: URL) { self.url = url }

    /// The session in the file; nil when there is no file.
    public func load() throws -> StoredSession? {
        try lock.withLock {
            guard let data = try? Data(contentsOf: url) else { return nil }
            return try GatehouseJSON.decoder.decode(StoredSession.self, from: data)
        }
    }

    /// Writes `session` to a new file beside the old one, then renames it over it. The new file
    /// is made 0600 by `open` itself: the tokens are never readable by others, not even for a
    /// moment (`FileManager.createFile` writes the file first and sets its mode afterwards).
    public func save(_ session: StoredSession) throws {
        let data = try GatehouseJSON.encoder.encode(session)
        try lock.withLock {
            let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)")
            let descriptor = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            guard descriptor >= 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary.path]) }
            let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            let saved = written == data.count && fchmod(descriptor, 0o600) == 0 && fsync(descriptor) == 0
            close(descriptor)
            guard saved, rename(temporary.path, url.path) == 0 else {
                unlink(temporary.path)
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
            }
        }
    }

    /// Removes the file.
    public func clear() throws {
        try lock.withLock {
            guard FileManager.default.fileExists(atPath: url.path) else { return }
            try FileManager.default.removeItem(at: url)
        }
    }
}

#if canImport(Security)
/// A session kept in the Keychain (a generic password item, this device only, readable after
/// the first unlock): the store for an iOS or macOS app.
public final class KeychainTokenStore: TokenStore, @unchecked Sendable {
    /// The item's service (`kSecAttrService`).
    public let service: String
    /// The item's account (`kSecAttrAccount`).
    public let account: String
    /// The Keychain access group shared with extensions, if any.
    public let accessGroup: String?

    /// A store in the item of `service` and `account` (defaults fit one session per app).
    public init(service: String = "dev.gatehouse.session", account: String = "default", accessGroup: String? = nil) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
    }

    private var query: [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: account,
        ]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }

    /// The session in the item; nil when there is none.
    public func load() throws -> StoredSession? {
        var lookup = query
        lookup[kSecReturnData as String] = true
        lookup[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: AnyObject?
        let status = SecItemCopyMatching(lookup as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let data = result as? Data else { throw KeychainError(status: status) }
        return try GatehouseJSON.decoder.decode(StoredSession.self, from: data)
    }

    /// Writes `session` to the item (made if missing).
    public func save(_ session: StoredSession) throws {
        let data = try GatehouseJSON.encoder.encode(session)
        let update: [String: Any] = [kSecValueData as String: data]
        var status = SecItemUpdate(query as CFDictionary, update as CFDictionary)
        if status == errSecItemNotFound {
            var add = query
            add[kSecValueData as String] = data
            add[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            status = SecItemAdd(add as CFDictionary, nil)
        }
        guard status == errSecSuccess else { throw KeychainError(status: status) }
    }

    /// Deletes the item.
    public func clear() throws {
        let status = SecItemDelete(query as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError(status: status) }
    }

    /// A Keychain call failed with `status` (an `OSStatus`).
    public struct KeychainError: Error, Equatable {
        /// The `OSStatus`.
        public let status: Int32
    }
}
#endif
