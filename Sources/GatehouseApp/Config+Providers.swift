import Crypto
import Foundation
import GatehouseSupport
import IdentityService
import ProviderTokens

/// The configuration keys of sign-in with identity providers (issue 20).
extension ConfigTable {
    /// The client ids Apple's tokens may be issued for.
    public static let appleClientIDs = ConfigKey(env: "GATEHOUSE_APPLE_CLIENT_IDS", defaultValue: "", secret: false, roles: "serve, identity", help: "Comma-separated client ids (audiences) of Sign in with Apple: the iOS bundle id, the services id of the web sign-in. Set: the provider `apple.com` is on (issuer https://appleid.apple.com, nonce as its SHA-256 in hex).")
    /// Where Apple's keys are fetched.
    public static let appleJWKSURL = ConfigKey(env: "GATEHOUSE_APPLE_JWKS_URL", defaultValue: "https://appleid.apple.com/auth/keys", secret: false, roles: "serve, identity", help: "Where the keys of Apple's ID tokens are fetched (https; change it only for a mirror or a test provider).")
    /// The client ids Google's tokens may be issued for.
    public static let googleClientIDs = ConfigKey(env: "GATEHOUSE_GOOGLE_CLIENT_IDS", defaultValue: "", secret: false, roles: "serve, identity", help: "Comma-separated OAuth client ids (audiences) of Google Sign-In: the iOS, Android and web client ids. Set: the provider `google.com` is on (issuers https://accounts.google.com and accounts.google.com).")
    /// Where Google's keys are fetched.
    public static let googleJWKSURL = ConfigKey(env: "GATEHOUSE_GOOGLE_JWKS_URL", defaultValue: "https://www.googleapis.com/oauth2/v3/certs", secret: false, roles: "serve, identity", help: "Where the keys of Google's ID tokens are fetched (https; change it only for a mirror or a test provider).")
    /// Generic OpenID Connect providers.
    public static let oidcProviders = ConfigKey(env: "GATEHOUSE_OIDC_PROVIDERS", defaultValue: "", secret: false, roles: "serve, identity", help: "OpenID Connect providers, `;`-separated, each `name|issuer|client-id,client-id`: the provider id is `oidc.<name>`, its keys are found by the issuer's discovery document (`<issuer>/.well-known/openid-configuration`), and its tokens must carry that exact `iss`.")
    /// How often an unknown key id may cause a refetch of a provider's keys.
    public static let providerKeyRefetchInterval = ConfigKey(env: "GATEHOUSE_PROVIDER_KEY_REFETCH_INTERVAL", defaultValue: "60", secret: false, range: 1...3600, roles: "serve, identity", help: "Seconds between refetches of a provider's keys caused by a token with an unknown `kid` (1–3600); between them such tokens are refused without a fetch.")
    /// The deadline of a provider key fetch.
    public static let providerFetchTimeoutMs = ConfigKey(env: "GATEHOUSE_PROVIDER_FETCH_TIMEOUT_MS", defaultValue: "1000", secret: false, range: 50...10_000, roles: "serve, identity", help: "Milliseconds a fetch of a provider's keys, or a call to Apple's token or revocation endpoint, may take (50–10000); past it the sign-in answers 503 `provider_unavailable`. Keep it below GATEHOUSE_RPC_TIMEOUT_MS.")
    /// Test mode for providers: plain http on loopback.
    public static let providersInsecureLoopback = ConfigKey(env: "GATEHOUSE_PROVIDERS_INSECURE_LOOPBACK", defaultValue: "false", secret: false, roles: "serve, identity", help: "For tests only: allow provider addresses over plain http on a loopback host (127.0.0.1, ::1, localhost). Never in production.")

    /// Sign in with Apple's server side: the developer team.
    public static let appleTeamID = ConfigKey(env: "GATEHOUSE_APPLE_TEAM_ID", defaultValue: nil, secret: false, roles: "serve, identity", help: "Apple developer team id. With GATEHOUSE_APPLE_KEY_ID and GATEHOUSE_APPLE_PRIVATE_KEY_FILE, Sign in with Apple's authorization codes are exchanged for Apple refresh tokens (kept sealed with the key-encryption key) that are revoked at Apple when the account is deleted or Apple unlinked (App Store requirement).")
    /// The id of the Sign in with Apple key.
    public static let appleKeyID = ConfigKey(env: "GATEHOUSE_APPLE_KEY_ID", defaultValue: nil, secret: false, roles: "serve, identity", help: "Key id of the Sign in with Apple private key (the client secret's `kid`).")
    /// The .p8 key file.
    public static let applePrivateKeyFile = ConfigKey(env: "GATEHOUSE_APPLE_PRIVATE_KEY_FILE", defaultValue: nil, secret: false, roles: "serve, identity", help: "File holding the Sign in with Apple private key (the .p8 PEM from the developer account); keep it 0600. Gatehouse signs its ES256 client secret (a day long, cached) with it.")
    /// Apple's token endpoint.
    public static let appleTokenURL = ConfigKey(env: "GATEHOUSE_APPLE_TOKEN_URL", defaultValue: "https://appleid.apple.com/auth/token", secret: false, roles: "serve, identity", help: "Apple's token endpoint (authorization codes exchanged here); change it only for a test provider.")
    /// Apple's revocation endpoint.
    public static let appleRevokeURL = ConfigKey(env: "GATEHOUSE_APPLE_REVOKE_URL", defaultValue: "https://appleid.apple.com/auth/revoke", secret: false, roles: "serve, identity", help: "Apple's token revocation endpoint; change it only for a test provider.")

    /// The keys above, in `ConfigTable.all`.
    static let providerKeys = [
        appleClientIDs, appleJWKSURL, googleClientIDs, googleJWKSURL, oidcProviders, providerKeyRefetchInterval, providerFetchTimeoutMs,
        providersInsecureLoopback, appleTeamID, appleKeyID, applePrivateKeyFile, appleTokenURL, appleRevokeURL,
    ]
}

extension IdentityRoleSettings {
    /// The key's value (or default) as an absolute URL; a `ConfigError` naming the key otherwise.
    static func absoluteURL(_ config: Config, _ key: ConfigKey) throws -> URL {
        let text = config.string(key) ?? key.defaultValue ?? ""
        guard let url = URL(string: text), url.host != nil else {
            throw ConfigError(message: "\(key.env) (\(key.flag)) is not an absolute URL: \(text.debugDescription)")
        }
        return url
    }

    /// Sign in with Apple's server side, when the team id, key id and key file are all set (some
    /// but not all: an error naming the missing ones). The refresh tokens are sealed with the
    /// key-encryption key (`GATEHOUSE_KEY_ENCRYPTION_KEY_FILE`, or the data folder's
    /// `identity-key-encryption.key`, made 0600 on first start).
    static func appleServer(_ config: Config, dataDir: String) throws -> AppleServerConfiguration? {
        let keys = [ConfigTable.appleTeamID, ConfigTable.appleKeyID, ConfigTable.applePrivateKeyFile]
        let set = keys.filter { !(config.string($0) ?? "").isEmpty }
        if set.isEmpty { return nil }
        guard set.count == keys.count else {
            let missing = keys.filter { key in !set.contains(key) }.map(\.env).joined(separator: ", ")
            throw ConfigError(message: "Sign in with Apple's server side needs GATEHOUSE_APPLE_TEAM_ID, GATEHOUSE_APPLE_KEY_ID and GATEHOUSE_APPLE_PRIVATE_KEY_FILE together; missing: \(missing)")
        }
        guard !(config.string(ConfigTable.appleClientIDs) ?? "").isEmpty else {
            throw ConfigError(message: "GATEHOUSE_APPLE_TEAM_ID is set but GATEHOUSE_APPLE_CLIENT_IDS is not: Sign in with Apple needs its client ids")
        }
        let path = config.string(ConfigTable.applePrivateKeyFile)!
        guard let pem = SecretFiles.contents(atPath: path).map({ String(decoding: $0, as: UTF8.self) }) else {
            throw ConfigError(message: "GATEHOUSE_APPLE_PRIVATE_KEY_FILE (--apple-private-key-file): cannot read \(path)")
        }
        let sealing: SymmetricKey
        if let file = config.string(ConfigTable.keyEncryptionKeyFile), !file.isEmpty {
            sealing = try TokenRoleSettings.readKey(file)
        } else {
            // Its own file, which only the identity role writes: the token role's key file is made
            // by the token role, and two roles starting at once on one folder must not race.
            let file = URL(fileURLWithPath: dataDir).appendingPathComponent("identity-key-encryption.key").path
            if FileManager.default.fileExists(atPath: file) {
                sealing = try TokenRoleSettings.readKey(file, source: "the identity's key-encryption key made on first start")
            } else {
                sealing = try KeyEncryptionKey.make(at: file)
            }
        }
        return AppleServerConfiguration(
            teamID: config.string(ConfigTable.appleTeamID)!, keyID: config.string(ConfigTable.appleKeyID)!, privateKeyPEM: pem,
            tokenURL: try absoluteURL(config, ConfigTable.appleTokenURL), revokeURL: try absoluteURL(config, ConfigTable.appleRevokeURL), sealingKey: sealing)
    }

    /// The configured providers (ids `apple.com`, `google.com`, `oidc.<name>`) and the verifier's options.
    static func providers(_ config: Config) throws -> ([ProviderConfiguration], IDTokenVerifier.Options) {
        let insecure = try config.bool(ConfigTable.providersInsecureLoopback)
        var providers: [ProviderConfiguration] = []
        func clientIDs(_ text: String) -> [String] {
            text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        do {
            let apple = clientIDs(config.string(ConfigTable.appleClientIDs) ?? "")
            if !apple.isEmpty {
                providers.append(try ProviderConfiguration(
                    name: "apple.com", issuers: ["https://appleid.apple.com"], keySource: .jwks(try absoluteURL(config, ConfigTable.appleJWKSURL)),
                    clientIDs: apple, nonceForm: .sha256Hex, allowInsecureLoopback: insecure))
            }
            let google = clientIDs(config.string(ConfigTable.googleClientIDs) ?? "")
            if !google.isEmpty {
                providers.append(try ProviderConfiguration(
                    name: "google.com", issuers: ["https://accounts.google.com", "accounts.google.com"],
                    keySource: .jwks(try absoluteURL(config, ConfigTable.googleJWKSURL)), clientIDs: google, nonceForm: .raw, allowInsecureLoopback: insecure))
            }
            for entry in (config.string(ConfigTable.oidcProviders) ?? "").split(separator: ";") {
                let parts = entry.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
                let key = ConfigTable.oidcProviders
                guard parts.count == 3, !parts[0].isEmpty,
                    parts[0].utf8.count <= 59, parts[0].utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D })
                else {
                    throw ConfigError(message: "\(key.env) (\(key.flag)): each provider is `name|issuer|client-id,client-id` with a name of lowercase letters, digits and `-`; not \(String(entry).debugDescription)")
                }
                providers.append(try .openIDConnect(
                    name: "oidc." + parts[0], issuer: parts[1], clientIDs: clientIDs(parts[2]), allowInsecureLoopback: insecure))
            }
        } catch let error as ProviderConfigurationError {
            throw ConfigError(message: "identity providers: \(error.message)")
        }
        var options = IDTokenVerifier.Options()
        options.cachePolicy.unknownKeyRefetchInterval = TimeInterval(try config.int(ConfigTable.providerKeyRefetchInterval))
        options.cachePolicy.fetchTimeout = .milliseconds(try config.int(ConfigTable.providerFetchTimeoutMs))
        return (providers, options)
    }
}
