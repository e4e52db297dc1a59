import Foundation
import GatehouseSupport
import GatehouseContracts
import GatehouseRPC
import ZeroMQ

/// The roles that talk to each other over ZeroMQ.
public enum ServiceRole: String, Sendable {
    case identity, token, gateway
}

/// A role's CURVE keys, read from the configuration table.
public struct CurveLinkKeys: Sendable {
    /// This process's key pair (the public key derived from the configured secret key).
    public var keyPair: CurveKeyPair
    /// Client public keys this role's servers accept (identity and token roles).
    public var allowedClientKeys: Set<[UInt8]>
    /// The identity service's public key, for roles that call it.
    public var identityServerKey: [UInt8]?
    /// The token service's public key, for roles that call it or subscribe to its events.
    public var tokenServerKey: [UInt8]?

    /// Keys for this role's RPC and events server sockets (ZAP allow list included).
    public var server: CurveServerKeys {
        CurveServerKeys(publicKey: keyPair.publicKey, secretKey: keyPair.secretKey, allowedClientKeys: allowedClientKeys, zapDomain: "gatehouse")
    }

    /// Which role each client key plays at this role's servers: the other service's key is that
    /// service, this role's own key may call anything, and every other allowed key is a gateway,
    /// the least privileged role. So the gateway's key cannot mint sessions (`token.issueSession`
    /// is for the identity service) or read claims (`identity.claimsForSession`, for the token service).
    public var callerRoles: CallerRoles {
        var roles: [String: ServiceCaller] = [:]
        if let key = identityServerKey.flatMap(Z85.encode) { roles[key] = .identity }
        if let key = tokenServerKey.flatMap(Z85.encode) { roles[key] = .token }
        return CallerRoles(roles: roles, otherKeys: .gateway, ownKey: keyPair.publicKeyZ85)
    }

    /// Keys for a client socket of the server whose public key is `serverKey`.
    public func client(of serverKey: [UInt8]?) -> CurveClientKeys? {
        guard let serverKey else { return nil }
        return CurveClientKeys(publicKey: keyPair.publicKey, secretKey: keyPair.secretKey, serverPublicKey: serverKey)
    }
}

/// How a role secures its service links: CURVE keys when configured, else plain text, which is
/// allowed on `ipc://` and `inproc://`, and on tcp (loopback included: any local process could
/// call every method) only with `GATEHOUSE_ALLOW_PLAINTEXT=true`.
public struct LinkSecurity: Sendable {
    /// Nil: plain text.
    public var curve: CurveLinkKeys?
    /// Warnings to log at start (plain-text tcp links).
    public var warnings: [String]

    /// A policy with `curve` keys (nil: plain text) and start-up `warnings`.
    public init(curve: CurveLinkKeys? = nil, warnings: [String] = []) {
        self.curve = curve
        self.warnings = warnings
    }

    /// One ZeroMQ link of a role: the key it was configured by, its endpoint, and whether the
    /// role binds it (server) or connects to it (client).
    public struct Link: Sendable {
        /// The configuration key that gave the endpoint, named in errors and warnings.
        public var key: ConfigKey
        /// The ZeroMQ endpoint.
        public var endpoint: String
        /// True when the role binds the endpoint (a server), false when it connects to it.
        public var binds: Bool
        /// A link configured by `key`.
        public init(_ key: ConfigKey, _ endpoint: String, binds: Bool) {
            self.key = key
            self.endpoint = endpoint
            self.binds = binds
        }
    }

    /// Reads the CURVE keys of `role` and checks its `links` against the plain-text policy.
    /// Links that are all `inproc://` (`gatehouse serve`) need no keys, and none are read.
    public static func load(_ config: Config, role: ServiceRole, links given: [Link]) throws -> LinkSecurity {
        // A list of instances is one link per endpoint.
        let links = given.flatMap { link in
            Config.splitEndpoints(link.endpoint).map { Link(link.key, $0, binds: link.binds) }
        }
        if links.allSatisfy({ $0.endpoint.hasPrefix("inproc://") }) { return LinkSecurity() }
        if let path = config.string(ConfigTable.curveSecretKeyFile), !path.isEmpty {
            return LinkSecurity(curve: try loadKeys(config, role: role, secretKeyPath: path))
        }
        let allowPlaintext = try config.bool(ConfigTable.allowPlaintext)
        var plain: [String] = []
        for link in links where link.endpoint.hasPrefix("tcp://") {
            guard allowPlaintext else {
                let verb = link.binds ? "binds" : "connects to"
                let place = isLoopback(link.endpoint) ? "a loopback tcp address, where any local process could call every service method," : "a tcp address"
                throw ConfigError(message: "\(link.key.env) (\(link.key.flag)) \(verb) \(link.endpoint), \(place) without CURVE: run `gatehouse keys generate` and set \(ConfigTable.curveSecretKeyFile.env) and its companion keys (docs/operators/deployment.md, \"Running the roles separately\"), or set \(ConfigTable.allowPlaintext.env)=true to accept plain text")
            }
            plain.append("\(link.key.env) \(link.endpoint)\(isLoopback(link.endpoint) ? "" : " (NOT loopback)")")
        }
        var warnings: [String] = []
        if !plain.isEmpty {
            warnings.append("SERVICE LINKS IN PLAIN TEXT because \(ConfigTable.allowPlaintext.env)=true (\(plain.joined(separator: ", "))): they are neither encrypted nor authenticated, so any process that can reach them can read and forge service calls, including minting sessions for any user. Use CURVE keys (`gatehouse keys generate`) outside development")
        }
        return LinkSecurity(warnings: warnings)
    }

    /// This process's key pair, from the secret key in the file at `secretKeyPath`.
    static func ownKeyPair(_ secretKeyPath: String) throws -> CurveKeyPair {
        let secretKey = ConfigTable.curveSecretKeyFile
        guard let data = SecretFiles.contents(atPath: secretKeyPath) else {
            throw ConfigError(message: "\(secretKey.env) (\(secretKey.flag)): cannot read the file")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let secret = Z85.decodeKey(text), let pair = try? CurveKeyPair(secretKey: secret) else {
            throw ConfigError(message: "\(secretKey.env) (\(secretKey.flag)): the file must hold a CURVE secret key, 40 Z85 characters")
        }
        return pair
    }

    /// Keys for a process to call its own CURVE server (the ZAP handler always accepts a
    /// server's own key): what `gatehouse healthcheck` uses inside the service's container.
    /// Nil when no secret key is configured.
    public static func selfProbeKeys(_ config: Config) throws -> CurveClientKeys? {
        guard let path = config.string(ConfigTable.curveSecretKeyFile), !path.isEmpty else { return nil }
        let pair = try ownKeyPair(path)
        return CurveClientKeys(publicKey: pair.publicKey, secretKey: pair.secretKey, serverPublicKey: pair.publicKey)
    }

    static func loadKeys(_ config: Config, role: ServiceRole, secretKeyPath: String) throws -> CurveLinkKeys {
        let pair = try ownKeyPair(secretKeyPath)
        var keys = CurveLinkKeys(keyPair: pair, allowedClientKeys: [])
        if role == .identity || role == .token {
            keys.allowedClientKeys = Set(try keyList(config, ConfigTable.curveAllowedKeysFile))
        }
        if role == .token || role == .gateway {
            keys.identityServerKey = try singleKey(config, ConfigTable.identityPublicKeyFile)
        }
        if role == .identity || role == .gateway {
            keys.tokenServerKey = try singleKey(config, ConfigTable.tokenPublicKeyFile)
        }
        return keys
    }

    /// The Z85 public keys in the file named by `key`, required when a secret key is set: one a
    /// line, blank lines and lines starting with `#` ignored, a `# comment` after a key allowed.
    static func keyList(_ config: Config, _ key: ConfigKey) throws -> [[UInt8]] {
        guard let path = config.string(key), !path.isEmpty else {
            throw ConfigError(message: "\(key.env) (\(key.flag)) is required when \(ConfigTable.curveSecretKeyFile.env) is set: \(key.help)")
        }
        guard let data = SecretFiles.contents(atPath: path) else {
            throw ConfigError(message: "\(key.env) (\(key.flag)): cannot read \(path)")
        }
        return try parseKeys(String(decoding: data, as: UTF8.self), key: key, path: path)
    }

    static func parseKeys(_ text: String, key: ConfigKey, path: String) throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            // '#' is a Z85 character, so a comment after a key needs whitespace before it.
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let decoded = Z85.decodeKey(String(fields[0])), fields.count == 1 || fields[1].hasPrefix("#") else {
                throw ConfigError(message: "\(key.env) (\(key.flag)): line \(index + 1) of \(path) is not a CURVE public key (40 Z85 characters, optionally followed by a # comment)")
            }
            keys.append(decoded)
        }
        return keys
    }

    /// The one public key in the file named by `key`, required when a secret key is set.
    static func singleKey(_ config: Config, _ key: ConfigKey) throws -> [UInt8] {
        let keys = try keyList(config, key)
        guard keys.count == 1 else {
            throw ConfigError(message: "\(key.env) (\(key.flag)) must hold exactly one CURVE public key, not \(keys.count)")
        }
        return keys[0]
    }

    /// Whether a `tcp://` endpoint's host is a loopback address (127.0.0.0/8, ::1, localhost).
    /// Wildcards (`*`, `0.0.0.0`, `::`), interface names and other hosts are not.
    static func isLoopback(_ endpoint: String) -> Bool {
        var address = Substring(endpoint.dropFirst("tcp://".count))
        // A connect endpoint may name a source first: tcp://SOURCE;HOST:PORT.
        if let semicolon = address.lastIndex(of: ";") { address = address[address.index(after: semicolon)...] }
        let host: Substring
        if address.hasPrefix("["), let close = address.firstIndex(of: "]") {
            host = address[address.index(after: address.startIndex)..<close]
        } else if let colon = address.lastIndex(of: ":") {
            host = address[..<colon]
        } else {
            host = address
        }
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
