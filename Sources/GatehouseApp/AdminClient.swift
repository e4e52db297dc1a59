import Foundation
import SQLiteStores
import IdentityPorts
import GatehouseContracts
import GatehouseRPC
import IdentityService
import Logging
import ZeroMQ

/// A client of the running identity service's administrative methods, for the `gatehouse users`
/// commands. It reaches the service at `GATEHOUSE_IDENTITY_URL` with the link security of the
/// configuration it is given:
///
/// - CURVE keys configured (`GATEHOUSE_CURVE_SECRET_KEY_FILE`): the key must be the identity
///   service's own secret key (run the command with the identity role's configuration, e.g. in
///   its container). A service's own key may call all of its methods; the administrative ones
///   (`setDisabled`, `setCustomClaims`, `deleteUser`) accept no other caller.
/// - No keys: plain text, which a `tcp://` endpoint accepts only with
///   `GATEHOUSE_ALLOW_PLAINTEXT=true`, as for the roles.
public struct AdminClient: Sendable {
    /// The identity service's RPC endpoint.
    public let endpoint: String
    /// Each call's deadline (`GATEHOUSE_RPC_TIMEOUT_MS`).
    public let timeout: Duration
    let client: RPCClient

    /// A client of the identity service configured by `config`; `ConfigError` naming the key
    /// for a bad endpoint, a plain-text tcp link that is not allowed, or another role's key.
    public init(config: Config) throws {
        endpoint = try config.endpoint(ConfigTable.identityURL)
        timeout = .milliseconds(try config.int(ConfigTable.rpcTimeoutMs))
        var configuration = RPCClient.Configuration(endpoint: endpoint, defaultTimeout: timeout)
        configuration.curve = try Self.curveKeys(config, endpoint: endpoint)
        var logger = Logger(label: "gatehouse.users")
        logger.logLevel = .critical
        client = try RPCClient(configuration: configuration, logger: logger)
    }

    /// The CURVE keys of the link to `endpoint`: the identity service's own pair, or nil (plain
    /// text, checked against `GATEHOUSE_ALLOW_PLAINTEXT` like a role's links).
    static func curveKeys(_ config: Config, endpoint: String) throws -> CurveClientKeys? {
        guard let keys = try LinkSecurity.selfProbeKeys(config) else {
            _ = try LinkSecurity.load(config, role: .gateway, links: [.init(ConfigTable.identityURL, endpoint, binds: false)])
            return nil
        }
        // A gateway's or token service's configuration names the identity service's public key:
        // if it is not this key pair's, the secret key is another role's, whose calls would be refused.
        if let path = config.string(ConfigTable.identityPublicKeyFile), !path.isEmpty,
            let identityKey = try? LinkSecurity.singleKey(config, ConfigTable.identityPublicKeyFile), identityKey != keys.publicKey
        {
            let secret = ConfigTable.curveSecretKeyFile
            throw ConfigError(
                message: "\(secret.env) (\(secret.flag)) holds another role's key: `gatehouse users` must run with the identity service's own secret key (its configuration, e.g. inside its container), the only key its administrative methods accept")
        }
        return keys
    }

    /// Disables (`disabled` true) or enables the user `userID`; disabling revokes its sessions.
    public func setDisabled(userID: String, disabled: Bool) async throws -> User {
        try await client.call(IdentityAPI.setDisabled, SetDisabledRequest(userID: userID, disabled: disabled), timeout: timeout)
    }

    /// Sets the custom claims of `userID` ("" or `{}` clears them).
    public func setCustomClaims(userID: String, claimsJSON: String) async throws -> User {
        try await client.call(IdentityAPI.setCustomClaims, SetCustomClaimsRequest(userID: userID, claimsJSON: claimsJSON), timeout: timeout)
    }

    /// Deletes the user `userID` and its linked identities; its sessions are revoked (committed)
    /// before the answer.
    public func deleteUser(userID: String) async throws {
        _ = try await client.call(IdentityAPI.deleteUser, UserIDRequest(userID: userID), timeout: timeout)
    }

    /// Makes an admin API key (`identity.createAdminKey`); the reply's token is shown once.
    public func createAdminKey(name: String, scopes: [String]) async throws -> CreateAdminKeyResponse {
        try await client.call(IdentityAPI.createAdminKey, CreateAdminKeyRequest(name: name, scopes: scopes), timeout: timeout)
    }

    /// Every admin API key.
    public func adminKeys() async throws -> [AdminKey] {
        try await client.call(IdentityAPI.listAdminKeys, Empty(), timeout: timeout).keys
    }

    /// Revokes the admin API key `id` at once.
    public func revokeAdminKey(id: String) async throws -> AdminKey {
        try await client.call(IdentityAPI.revokeAdminKey, AdminKeyIDRequest(id: id), timeout: timeout)
    }

    /// Closes the connection.
    public func close() async { await client.close() }

    /// One line for the operator about a failed call of `userID`.
    public func describe(_ error: any Error, userID: String) -> String {
        guard let error = error as? RPCError else { return "error: \(error)" }
        switch error.code {
        case .userNotFound:
            return "error: no user with id \(userID) (user_not_found)"
        case .adminKeyNotFound:
            return "error: no admin API key with id \(userID) (admin_key_not_found)"
        case .invalidArgument:
            return "error: \(error.message) (invalid_argument)"
        case .unavailable, .deadlineExceeded, .cancelled:
            return "error: no answer from the identity service at \(endpoint) within \(timeout) (\(error.code.rawValue)); is it running, and is \(ConfigTable.identityURL.env) its RPC endpoint?"
        case .permissionDenied:
            return "error: the identity service refused the call (permission_denied): run the command with the identity service's own CURVE key pair"
        default:
            return "error: \(error.message) (\(error.code.rawValue))"
        }
    }
}

/// The admin API's keys on the identity database file itself (`gatehouse admin keys ... --data-dir`):
/// for `gatehouse serve`, whose identity service has no RPC endpoint outside its process, or an
/// operator on the identity host. SQLite lets it write beside the running service.
public struct AdminKeyFile: Sendable {
    let store: SQLiteUserStore

    /// The keys of the identity database in `dataDir` (`identity.sqlite`); it must exist, made by
    /// the identity role (no migration is run here).
    public init(dataDir: String) async throws {
        let path = URL(fileURLWithPath: dataDir).appendingPathComponent("identity.sqlite").path
        guard FileManager.default.fileExists(atPath: path) else {
            throw ConfigError(message: "--data-dir: no identity database at \(path); start the identity role (or gatehouse serve) once first")
        }
        store = try await SQLiteUserStore.open(path: path)
        guard try await store.appliedMigrations().contains("0015-snake-case-columns") else {
            throw ConfigError(message: "--data-dir: the identity database at \(path) predates this version; start this version's identity role once first")
        }
    }

    /// Makes a key (shown once).
    public func create(name: String, scopes: [String]) async throws -> CreateAdminKeyResponse {
        try await store.createAdminKey(name: name, scopes: scopes, now: Date())
    }

    /// Every key.
    public func list() async throws -> [AdminKey] { try await store.adminKeys() }

    /// Revokes the key `id` (audited, as the service's own revocation is).
    public func revoke(id: String) async throws -> AdminKey { try await store.revokeAdminKey(id: id, at: Date()) }
}
