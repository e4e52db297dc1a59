import Foundation
import GatehouseRPC

/// One configuration key: read from the environment variable `env`, overridden by the flag
/// `--flag`. Every key is listed in `ConfigTable.all`, which the configuration table of
/// docs/operators/configuration.md is checked against.
public struct ConfigKey: Sendable, Hashable {
    /// The environment variable, e.g. `GATEHOUSE_HTTP_PORT`; `flag` is derived from it.
    public let env: String
    /// The default, or nil when the key is required (or optional without a default).
    public let defaultValue: String?
    /// Secrets are never logged and never have a literal default.
    public let secret: Bool
    /// For an integer key, the values it allows: the one place its range is stated. `Config.int`
    /// checks it and docs/operators/configuration.md's table states it (`rangeText`; a test compares them).
    public let range: ClosedRange<Int>?
    /// The roles that read the key (`serve, gateway`, `all`), as docs/operators/configuration.md's table shows them.
    public let roles: String
    /// One sentence on what the key sets; quoted when a required value is missing.
    public let help: String

    init(env: String, defaultValue: String?, secret: Bool, range: ClosedRange<Int>? = nil, roles: String, help: String) {
        self.env = env
        self.defaultValue = defaultValue
        self.secret = secret
        self.range = range
        self.roles = roles
        self.help = help
    }

    /// The allowed values as docs/operators/configuration.md's table states them, e.g. `50–60000`; nil without a range.
    public var rangeText: String? {
        range.map { "\($0.lowerBound)–\($0.upperBound)" }
    }

    /// `GATEHOUSE_HTTP_PORT` → `--http-port`.
    public var flag: String {
        "--" + env.dropFirst("GATEHOUSE_".count).lowercased().replacingOccurrences(of: "_", with: "-")
    }
}

/// Every configuration key of the `gatehouse` command, with its default and help text.
public enum ConfigTable {
    /// Where the SQLite files live.
    public static let dataDir = ConfigKey(env: "GATEHOUSE_DATA_DIR", defaultValue: "./.gatehouse", secret: false, roles: "serve, identity, token", help: "Folder for the SQLite files (identity.sqlite, token.sqlite).")
    /// How much the roles log.
    public static let logLevel = ConfigKey(env: "GATEHOUSE_LOG_LEVEL", defaultValue: "info", secret: false, roles: "all", help: "trace, debug, info, notice, warning, error or critical.")
    /// The address the HTTP API listens on.
    public static let httpHost = ConfigKey(env: "GATEHOUSE_HTTP_HOST", defaultValue: "127.0.0.1", secret: false, roles: "serve, gateway", help: "Address the HTTP API listens on.")
    /// The port the HTTP API listens on.
    public static let httpPort = ConfigKey(env: "GATEHOUSE_HTTP_PORT", defaultValue: "8080", secret: false, roles: "serve, gateway", help: "Port the HTTP API listens on.")
    /// The base URL clients use, for OpenID discovery (and the default issuer).
    public static let publicURL = ConfigKey(env: "GATEHOUSE_PUBLIC_URL", defaultValue: nil, secret: false, roles: "serve, gateway, identity", help: "Base URL clients use (default http://HOST:PORT); used in OpenID discovery and, at the identity service, for the links in mails (`<url>/actions`).")
    /// The `iss` claim that access tokens carry and the gateway requires.
    public static let issuer = ConfigKey(env: "GATEHOUSE_ISSUER", defaultValue: nil, secret: false, roles: "serve, token, gateway", help: "The `iss` of access tokens (default: the public URL).")
    /// The `aud` claim that access tokens carry and the gateway requires.
    public static let audience = ConfigKey(env: "GATEHOUSE_AUDIENCE", defaultValue: "gatehouse", secret: false, roles: "serve, token, gateway", help: "The `aud` of access tokens.")
    /// The browser origins CORS allows.
    public static let corsOrigins = ConfigKey(env: "GATEHOUSE_CORS_ORIGINS", defaultValue: "", secret: false, roles: "serve, gateway", help: "Comma-separated browser origins allowed by CORS (none by default).")
    /// The largest HTTP request body the gateway reads.
    public static let maxBodyBytes = ConfigKey(env: "GATEHOUSE_MAX_BODY_BYTES", defaultValue: "65536", secret: false, range: 1024...16_777_216, roles: "serve, gateway", help: "Largest request body accepted.")
    /// The deadline of each service call (and of each HTTP request at the gateway).
    public static let rpcTimeoutMs = ConfigKey(env: "GATEHOUSE_RPC_TIMEOUT_MS", defaultValue: "2000", secret: false, range: 50...60_000, roles: "all", help: "Deadline of each service call, in milliseconds.")
    /// The proxies whose `X-Forwarded-For` names the client.
    public static let trustedProxies = ConfigKey(env: "GATEHOUSE_TRUSTED_PROXIES", defaultValue: "", secret: false, roles: "serve, gateway", help: "Comma-separated IP addresses and CIDR ranges (IPv4, IPv6) of the proxies in front of the gateway. For a request from one of them, the client address (for rate limits and sessions) is the rightmost X-Forwarded-For entry that is not itself a trusted proxy; otherwise it is the TCP peer. Replaces GATEHOUSE_TRUST_FORWARDED_FOR.")
    /// How long the gateway waits for a whole request head.
    public static let httpHeadTimeoutMs = ConfigKey(env: "GATEHOUSE_HTTP_HEAD_TIMEOUT_MS", defaultValue: "10000", secret: false, range: 100...600_000, roles: "serve, gateway", help: "Milliseconds a client has to send a whole request head (from connecting, or from the first byte of a later request); then 408 `request_timeout` and the connection is closed.")
    /// How long the gateway waits for a whole request body.
    public static let httpBodyTimeoutMs = ConfigKey(env: "GATEHOUSE_HTTP_BODY_TIMEOUT_MS", defaultValue: "30000", secret: false, range: 100...3_600_000, roles: "serve, gateway", help: "Milliseconds a client has to send a whole request body after its head; then 408 `request_timeout` and the connection is closed.")
    /// How long a kept-alive connection may wait for its next request.
    public static let httpIdleTimeoutMs = ConfigKey(env: "GATEHOUSE_HTTP_IDLE_TIMEOUT_MS", defaultValue: "60000", secret: false, range: 100...3_600_000, roles: "serve, gateway", help: "Milliseconds a kept-alive connection may stay idle between requests before it is closed.")
    /// The most open HTTP connections.
    public static let httpMaxConnections = ConfigKey(env: "GATEHOUSE_HTTP_MAX_CONNECTIONS", defaultValue: "10000", secret: false, range: 1...1_000_000, roles: "serve, gateway", help: "Most open HTTP connections; past it a new connection gets 503 `too_many_connections` and is closed.")
    /// The most open HTTP connections from one client address.
    public static let httpMaxConnectionsPerAddress = ConfigKey(env: "GATEHOUSE_HTTP_MAX_CONNECTIONS_PER_ADDRESS", defaultValue: "256", secret: false, range: 0...1_000_000, roles: "serve, gateway", help: "Most open HTTP connections from one peer address (0: no cap); trusted proxies (GATEHOUSE_TRUSTED_PROXIES) are not capped.")
    /// Where the identity service's RPC server binds.
    public static let identityBind = ConfigKey(env: "GATEHOUSE_IDENTITY_BIND", defaultValue: "tcp://127.0.0.1:7001", secret: false, roles: "identity", help: "Endpoint the identity service's RPC server binds.")
    /// Where the identity service publishes user events.
    public static let identityEventsBind = ConfigKey(env: "GATEHOUSE_IDENTITY_EVENTS_BIND", defaultValue: "tcp://127.0.0.1:7002", secret: false, roles: "identity", help: "Endpoint the identity service publishes user events on.")
    /// Where the token service and the gateway reach the identity service.
    public static let identityURL = ConfigKey(env: "GATEHOUSE_IDENTITY_URL", defaultValue: "tcp://127.0.0.1:7001", secret: false, roles: "token, gateway", help: "Where to reach the identity service.")
    /// Where the token service's RPC server binds.
    public static let tokenBind = ConfigKey(env: "GATEHOUSE_TOKEN_BIND", defaultValue: "tcp://127.0.0.1:7011", secret: false, roles: "token", help: "Endpoint the token service's RPC server binds.")
    /// Where the token service publishes session events.
    public static let tokenEventsBind = ConfigKey(env: "GATEHOUSE_TOKEN_EVENTS_BIND", defaultValue: "tcp://127.0.0.1:7012", secret: false, roles: "token", help: "Endpoint the token service publishes session events on.")
    /// Where the identity service and the gateway reach the token service.
    public static let tokenURL = ConfigKey(env: "GATEHOUSE_TOKEN_URL", defaultValue: "tcp://127.0.0.1:7011", secret: false, roles: "identity, gateway", help: "Where to reach the token service.")
    /// Where the gateway subscribes to session revocations.
    public static let tokenEventsURL = ConfigKey(env: "GATEHOUSE_TOKEN_EVENTS_URL", defaultValue: "tcp://127.0.0.1:7012", secret: false, roles: "gateway", help: "Where to subscribe to session revocations.")
    /// Argon2id memory cost of new password hashes, in KiB.
    public static let argon2MemoryKiB = ConfigKey(env: "GATEHOUSE_ARGON2_MEMORY_KIB", defaultValue: "19456", secret: false, range: 8...4_194_304, roles: "serve, identity", help: "Argon2id memory cost (KiB); OWASP: 19456.")
    /// Argon2id time cost (passes) of new password hashes.
    public static let argon2Iterations = ConfigKey(env: "GATEHOUSE_ARGON2_ITERATIONS", defaultValue: "2", secret: false, range: 1...100, roles: "serve, identity", help: "Argon2id time cost.")
    /// Argon2id lanes of new password hashes.
    public static let argon2Parallelism = ConfigKey(env: "GATEHOUSE_ARGON2_PARALLELISM", defaultValue: "1", secret: false, range: 1...64, roles: "serve, identity", help: "Argon2id lanes.")
    /// How many threads hash passwords (default: one per core).
    public static let hashWorkers = ConfigKey(env: "GATEHOUSE_HASH_WORKERS", defaultValue: nil, secret: false, range: 1...256, roles: "serve, identity", help: "Password-hashing threads (default: the number of cores).")
    /// How many hash jobs may wait for a thread before sign-ups and sign-ins get `overloaded`.
    public static let hashQueue = ConfigKey(env: "GATEHOUSE_HASH_QUEUE", defaultValue: "64", secret: false, range: 0...100_000, roles: "serve, identity", help: "Hash jobs allowed to wait; past it, or when a hash could not be done before the call's deadline, sign-ups and sign-ins get `overloaded`.")
    /// The shortest password sign-up accepts.
    public static let passwordMinLength = ConfigKey(env: "GATEHOUSE_PASSWORD_MIN_LENGTH", defaultValue: "8", secret: false, range: 8...64, roles: "serve, identity", help: "Shortest password accepted (8 to 64).")
    /// The algorithm of new signing keys.
    public static let signingAlgorithm = ConfigKey(env: "GATEHOUSE_SIGNING_ALGORITHM", defaultValue: "ES256", secret: false, roles: "serve, token", help: "ES256, EdDSA or RS256 for new signing keys.")
    /// How long an access token is valid.
    public static let accessTokenTTL = ConfigKey(env: "GATEHOUSE_ACCESS_TOKEN_TTL", defaultValue: "900", secret: false, range: 60...86_400, roles: "serve, token, gateway", help: "Access-token lifetime in seconds; the gateway keeps revoked sessions listed this long (plus leeway), so give both roles the same value.")
    /// How long past `exp` (and before `iat`/`nbf`) an access token is still accepted.
    public static let accessTokenLeeway = ConfigKey(env: "GATEHOUSE_ACCESS_TOKEN_LEEWAY", defaultValue: "10", secret: false, range: 0...60, roles: "serve, token, gateway", help: "Seconds of clock skew allowed when an access token is checked (0–60): it is accepted until `exp` plus this, and with an `iat` or `nbf` up to this far ahead. The gateway keeps a revoked session listed, and the token service keeps a retired signing key published, for the token lifetime plus this; give both roles the same value.")
    /// A session's absolute lifetime, whatever its refreshes.
    public static let sessionTTL = ConfigKey(env: "GATEHOUSE_SESSION_TTL", defaultValue: "5184000", secret: false, range: 300...31_536_000, roles: "serve, token", help: "Absolute session lifetime in seconds (60 days).")
    /// How long a session may go without a refresh before it ends.
    public static let sessionIdleTTL = ConfigKey(env: "GATEHOUSE_SESSION_IDLE_TTL", defaultValue: "2592000", secret: false, range: 300...31_536_000, roles: "serve, identity, token", help: "Session idle timeout in seconds (30 days). The identity role reads it too: `GATEHOUSE_ANONYMOUS_RETENTION` may not be shorter.")
    /// How long an ended session (and a superseded refresh
    /// token) is kept before the sweep deletes it.
    public static let sessionRetention = ConfigKey(env: "GATEHOUSE_SESSION_RETENTION", defaultValue: "604800", secret: false, range: 3600...31_536_000, roles: "serve, token", help: "Seconds an ended (revoked, expired, idle) session is kept before the sweep deletes it (7 days); a superseded refresh token is kept at least this long, so its reuse still revokes the session.")
    /// How often the token service sweeps ended sessions and old refresh tokens.
    public static let sweepInterval = ConfigKey(env: "GATEHOUSE_SWEEP_INTERVAL", defaultValue: "600", secret: false, range: 0...86_400, roles: "serve, token", help: "Seconds between sweeps of ended sessions and old refresh tokens; 0 turns the sweep off.")
    /// Days after which the token service replaces its newest signing key by itself.
    public static let signingKeyRotationDays = ConfigKey(env: "GATEHOUSE_SIGNING_KEY_ROTATION_DAYS", defaultValue: "0", secret: false, range: 0...3650, roles: "serve, token", help: "Days (1–3650) after which the token service makes a new signing key by itself, when its newest key is older; 0 turns the schedule off (`gatehouse keys rotate-signing` still rotates). The old key stays published until its last token has expired. With several instances on one database, one rotation per due time.")
    /// How often the token service publishes its revocation heartbeat (the gateway's gap detector).
    public static let revocationHeartbeatMs = ConfigKey(env: "GATEHOUSE_REVOCATION_HEARTBEAT_MS", defaultValue: "1000", secret: false, range: 50...60_000, roles: "serve, token, gateway", help: "Milliseconds between the token service's `token.heartbeat`s, by which a gateway notices missed revocation events or a restarted token service; a gateway polls `token.listRevocations` when the feed is silent for three intervals. Use the same value for both roles.")
    /// How long a rotated refresh token still answers with its successor (a client's retry).
    public static let refreshGrace = ConfigKey(env: "GATEHOUSE_REFRESH_GRACE", defaultValue: "10", secret: false, range: 0...300, roles: "serve, token", help: "Seconds a rotated refresh token still returns its successor.")
    /// What an acknowledged write survives: a process crash, or also a power cut.
    public static let durability = ConfigKey(env: "GATEHOUSE_DURABILITY", defaultValue: "power-loss", secret: false, roles: "serve, identity, token", help: "`power-loss` (default): an acknowledged write survives a power cut or OS crash (SQLite WAL, synchronous=FULL, an fsync per commit; concurrent token writes share one); `process-crash`: only a crash of the process (synchronous=NORMAL).")
    /// The file with the key that encrypts signing keys at rest.
    public static let keyEncryptionKeyFile = ConfigKey(env: "GATEHOUSE_KEY_ENCRYPTION_KEY_FILE", defaultValue: nil, secret: true, roles: "serve, token, identity", help: "File holding the 32-byte key (raw, hex or base64) that seals signing keys (token service) and Apple refresh tokens (identity service) at rest. Unset: `key-encryption.key` (token) and `identity-key-encryption.key` (identity) in the data folder, made (0600) on first start.")

    /// The file with this process's CURVE secret key; set, it makes service links CURVE.
    public static let curveSecretKeyFile = ConfigKey(env: "GATEHOUSE_CURVE_SECRET_KEY_FILE", defaultValue: nil, secret: true, roles: "identity, token, gateway", help: "File holding this process's CURVE secret key (Z85, 40 characters; `gatehouse keys generate`). When set, service links are CURVE-encrypted and authenticated.")
    /// The file listing the client public keys a service's sockets accept.
    public static let curveAllowedKeysFile = ConfigKey(env: "GATEHOUSE_CURVE_ALLOWED_KEYS_FILE", defaultValue: nil, secret: false, roles: "identity, token", help: "File of client CURVE public keys (Z85, one a line, `#` comments) allowed to connect; required with a secret key.")
    /// The file with the identity service's CURVE public key, for its clients.
    public static let identityPublicKeyFile = ConfigKey(env: "GATEHOUSE_IDENTITY_PUBLIC_KEY_FILE", defaultValue: nil, secret: false, roles: "token, gateway", help: "File holding the identity service's CURVE public key (Z85); required with a secret key.")
    /// The file with the token service's CURVE public key, for its clients.
    public static let tokenPublicKeyFile = ConfigKey(env: "GATEHOUSE_TOKEN_PUBLIC_KEY_FILE", defaultValue: nil, secret: false, roles: "identity, gateway", help: "File holding the token service's CURVE public key (Z85); required with a secret key.")
    /// Whether plain-text tcp links to non-loopback addresses are allowed.
    public static let allowPlaintext = ConfigKey(env: "GATEHOUSE_ALLOW_PLAINTEXT", defaultValue: "false", secret: false, roles: "identity, token, gateway", help: "Allow plain-text (unauthenticated) tcp between services, loopback included; a loud warning at start. Without CURVE keys it is required for tcp links; `ipc://` and `inproc://` (`serve`) need neither.")

    /// Per-address budget of sign-ins.
    public static let rateLimitSignIn = ConfigKey(env: "GATEHOUSE_RATE_LIMIT_SIGN_IN", defaultValue: "60/min burst=20", secret: false, roles: "serve, gateway", help: "Sign-ins (`POST /v1/sessions`) per client address: `N/s`, `N/min` or `N/h`, optionally ` burst=B` (default B = N), or `off`. Past it: 429 `rate_limited` with Retry-After.")
    /// Anonymous sign-ups per client address.
    public static let rateLimitAnonymousSignUp = ConfigKey(env: "GATEHOUSE_RATE_LIMIT_ANONYMOUS_SIGN_UP", defaultValue: "20/min burst=10", secret: false, roles: "serve, gateway", help: "Anonymous sign-ups (`POST /v1/accounts/anonymous`) per client address, as for GATEHOUSE_RATE_LIMIT_SIGN_IN.")
    /// Per-address budget of sign-ups.
    public static let rateLimitSignUp = ConfigKey(env: "GATEHOUSE_RATE_LIMIT_SIGN_UP", defaultValue: "20/min burst=10", secret: false, roles: "serve, gateway", help: "Sign-ups (`POST /v1/accounts`) per client address, as for GATEHOUSE_RATE_LIMIT_SIGN_IN.")
    /// Per-address budget of password-strength checks.
    public static let rateLimitPasswordStrength = ConfigKey(env: "GATEHOUSE_RATE_LIMIT_PASSWORD_STRENGTH", defaultValue: "120/min burst=30", secret: false, roles: "serve, gateway", help: "Password-strength checks (`POST /v1/password-strength`) per client address, as for GATEHOUSE_RATE_LIMIT_SIGN_IN.")
    /// Per-address budget of refreshes.
    public static let rateLimitRefresh = ConfigKey(env: "GATEHOUSE_RATE_LIMIT_REFRESH", defaultValue: "600/min burst=120", secret: false, roles: "serve, gateway", help: "Refreshes (`POST /v1/sessions/refresh`) per client address, as for GATEHOUSE_RATE_LIMIT_SIGN_IN.")
    /// How many (class, address) buckets the gateway holds.
    public static let rateLimitMaxClients = ConfigKey(env: "GATEHOUSE_RATE_LIMIT_MAX_CLIENTS", defaultValue: "100000", secret: false, range: 16...100_000_000, roles: "serve, gateway", help: "Most (class, client address) buckets a gateway holds (about 64 bytes each); past it, refilled buckets are dropped first, then the least recently used.")
    /// Failed password checks per account before attempts wait.
    public static let accountThrottleFailures = ConfigKey(env: "GATEHOUSE_ACCOUNT_THROTTLE_FAILURES", defaultValue: "5", secret: false, range: 0...1000, roles: "serve, identity", help: "Failed password checks per account (per email, existing or not) and client address before further attempts from that address wait (429 `too_many_attempts`); from all addresses together, ten times this. 0 turns the throttle off.")
    /// How long an account's failures are remembered.
    public static let accountThrottleWindow = ConfigKey(env: "GATEHOUSE_ACCOUNT_THROTTLE_WINDOW", defaultValue: "900", secret: false, range: 1...86_400, roles: "serve, identity", help: "Seconds an account's failures are remembered after its last one.")
    /// The first wait of a throttled account.
    public static let accountThrottleBaseDelay = ConfigKey(env: "GATEHOUSE_ACCOUNT_THROTTLE_BASE_DELAY", defaultValue: "1", secret: false, range: 1...3600, roles: "serve, identity", help: "Seconds an account waits after its last allowed failure; doubles with each failure after it.")
    /// The longest wait of a throttled account.
    public static let accountThrottleMaxDelay = ConfigKey(env: "GATEHOUSE_ACCOUNT_THROTTLE_MAX_DELAY", defaultValue: "300", secret: false, range: 1...86_400, roles: "serve, identity", help: "Longest wait between two attempts on a throttled account, in seconds (there is never a permanent lock).")
    /// How many accounts the identity service tracks.
    public static let accountThrottleMaxAccounts = ConfigKey(env: "GATEHOUSE_ACCOUNT_THROTTLE_MAX_ACCOUNTS", defaultValue: "100000", secret: false, range: 16...100_000_000, roles: "serve, identity", help: "Most accounts (hashed emails) with failures each identity instance remembers; past it, expired ones are dropped first, then those below the threshold.")
    /// How recent a sign-in must be for credential changes and self-deletion.
    public static let recentLoginWindow = ConfigKey(env: "GATEHOUSE_RECENT_LOGIN_WINDOW", defaultValue: "300", secret: false, range: 0...604_800, roles: "serve, identity", help: "Seconds after a sign-in or re-authentication (the token's `auth_time`) within which a user may change their password or email or delete their account; later they get 403 `requires_recent_login` and re-authenticate (`POST /v1/me/reauthenticate`). 0 to 604800; 0 refuses those changes always (an anonymous user may still delete itself).")

    /// How long an anonymous user may be inactive before the identity service removes it.
    public static let anonymousRetention = ConfigKey(env: "GATEHOUSE_ANONYMOUS_RETENTION", defaultValue: "2592000", secret: false, range: 0...315_360_000, roles: "serve, identity", help: "Seconds an anonymous user may go without activity (its creation, its last sign-in, the last use of any of its sessions: a refresh counts) before the identity service's sweep removes it and revokes its sessions (30 days); 0 keeps anonymous users forever. Otherwise at least 3600.")
    /// How often the identity service sweeps inactive anonymous users.
    public static let anonymousSweepInterval = ConfigKey(env: "GATEHOUSE_ANONYMOUS_SWEEP_INTERVAL", defaultValue: "3600", secret: false, range: 0...86_400, roles: "serve, identity", help: "Seconds between the identity service's sweeps of inactive anonymous users (the first a minute after start, or one interval if shorter); 0 turns the sweep off.")
    /// How long a migration resume handle works.
    public static let migrationResumeTTL = ConfigKey(env: "GATEHOUSE_MIGRATION_RESUME_TTL", defaultValue: "300", secret: false, range: 10...3600, roles: "serve, identity", help: "Seconds a `migration_required` resume handle works (10–3600): an anonymous user who signed in to an existing account resumes with it (`POST /v1/sessions/resume`) once, from the same session. Handles live in the identity service's memory and do not survive its restart; with a shared PostgreSQL store they live in the database (sealed) and work on any instance.")

    /// For end-to-end tests only: the file of the shared clock offset (`OffsetClockFile`).
    public static let testClockFile = ConfigKey(env: "GATEHOUSE_TEST_CLOCK_FILE", defaultValue: nil, secret: false, roles: "all", help: "For end-to-end tests only: a file whose 8 bytes (a little-endian Int64) are milliseconds added to the system time, re-read at every clock reading, so a test moves the clock of every process at once. A warning is logged at start. Never set it in production.")
    /// The settings document every new user starts with.
    public static let defaultSettings = ConfigKey(env: "GATEHOUSE_DEFAULT_SETTINGS", defaultValue: "{}", secret: false, roles: "serve, identity", help: "Settings (a JSON object, at most 16 KiB) written for every new user, at sign-up and anonymous start, e.g. {\"theme\":\"dark\"}; checked at start-up.")

    /// The SMTP relay mail goes to; unset, mail goes to the local mailbox.
    public static let smtpHost = ConfigKey(env: "GATEHOUSE_SMTP_HOST", defaultValue: nil, secret: false, roles: "serve, identity", help: "SMTP relay the identity service delivers mail to. Unset: mail goes to the local mailbox `<data folder>/mailbox` (one .eml file per mail; `gatehouse mail list`).")
    /// The SMTP relay's port.
    public static let smtpPort = ConfigKey(env: "GATEHOUSE_SMTP_PORT", defaultValue: "587", secret: false, range: 1...65_535, roles: "serve, identity", help: "Port of the SMTP relay (587 submission with STARTTLS; 465 with implicit TLS).")
    /// How the SMTP connection is encrypted.
    public static let smtpTLS = ConfigKey(env: "GATEHOUSE_SMTP_TLS", defaultValue: "starttls", secret: false, roles: "serve, identity", help: "`starttls` (required, certificate verified), `implicit` (TLS from the first byte) or `none` (plain text; credentials are then only sent to a loopback relay).")
    /// The SMTP login.
    public static let smtpUsername = ConfigKey(env: "GATEHOUSE_SMTP_USERNAME", defaultValue: nil, secret: false, roles: "serve, identity", help: "SMTP AUTH user name (unset: no AUTH); needs GATEHOUSE_SMTP_PASSWORD_FILE.")
    /// The file with the SMTP password.
    public static let smtpPasswordFile = ConfigKey(env: "GATEHOUSE_SMTP_PASSWORD_FILE", defaultValue: nil, secret: true, roles: "serve, identity", help: "File holding the SMTP AUTH password (one line; a trailing newline is ignored). Used only with GATEHOUSE_SMTP_USERNAME, and then it must not be empty; without a user name no AUTH is sent (the compose file mounts /dev/null).")
    /// A CA file for a relay with a private certificate.
    public static let smtpCAFile = ConfigKey(env: "GATEHOUSE_SMTP_CA_FILE", defaultValue: nil, secret: false, roles: "serve, identity", help: "PEM file of CA certificates trusted for the relay, besides the system's (a private relay).")
    /// Attempts before a mail is dead-lettered.
    public static let mailMaxAttempts = ConfigKey(env: "GATEHOUSE_MAIL_MAX_ATTEMPTS", defaultValue: "10", secret: false, range: 1...100, roles: "serve, identity", help: "Delivery attempts per mail (1–100) before it is marked dead; retries wait 30 s doubling up to 1 h, less up to 20% jitter. A permanent refusal of the mail (5xx to its recipient or content) marks it dead at once.")

    /// Every key above: the flags `Config` accepts, and
    /// the rows docs/operators/configuration.md's table is checked against.
    public static let all: [ConfigKey] = [
        dataDir, logLevel, httpHost, httpPort, publicURL, issuer, audience, corsOrigins, maxBodyBytes, rpcTimeoutMs,
        trustedProxies, identityBind, identityEventsBind, identityURL, tokenBind, tokenEventsBind, tokenURL, tokenEventsURL,
        argon2MemoryKiB, argon2Iterations, argon2Parallelism, hashWorkers, hashQueue, passwordMinLength, signingAlgorithm,
        accessTokenTTL, accessTokenLeeway, sessionTTL, sessionIdleTTL, sessionRetention, sweepInterval, signingKeyRotationDays, refreshGrace, durability, keyEncryptionKeyFile,
        curveSecretKeyFile, curveAllowedKeysFile, identityPublicKeyFile, tokenPublicKeyFile, allowPlaintext,
        httpHeadTimeoutMs, httpBodyTimeoutMs, httpIdleTimeoutMs, httpMaxConnections, httpMaxConnectionsPerAddress,
        revocationHeartbeatMs,
        rateLimitSignIn, rateLimitSignUp, rateLimitAnonymousSignUp, rateLimitPasswordStrength, rateLimitRefresh, rateLimitMaxClients,
        accountThrottleFailures, accountThrottleWindow, accountThrottleBaseDelay, accountThrottleMaxDelay, accountThrottleMaxAccounts,
        recentLoginWindow,
        anonymousRetention, anonymousSweepInterval,
        testClockFile,
        defaultSettings,
        migrationResumeTTL,
        smtpHost, smtpPort, smtpTLS, smtpUsername, smtpPasswordFile, smtpCAFile, mailMaxAttempts,
    ] + passwordResetKeys + emailFlowKeys + mailDeliveryKeys + streamKeys + auditKeys + providerKeys + databaseKeys

    /// Keys that are gone, with what replaced them: set to anything but false, start-up stops.
    static let removed: [String: String] = [
        "GATEHOUSE_TRUST_FORWARDED_FOR": "GATEHOUSE_TRUST_FORWARDED_FOR was removed: list the proxies in GATEHOUSE_TRUSTED_PROXIES (IPs or CIDR ranges) instead",
    ]
}

/// A configuration problem, naming the key so an operator can fix it.
public struct ConfigError: Error, CustomStringConvertible {
    /// What is wrong, naming the key's variable and flag.
    public let message: String
    /// An error with `message`.
    public init(message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// Values from the environment, overridden by `--flag value` / `--flag=value` arguments.
public struct Config: Sendable {
    private var values: [String: String] = [:]

    /// Reads every known key from `environment`, then the flags in `arguments`; an unknown flag or
    /// a flag without a value is an error.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment, arguments: [String] = []) throws {
        let byFlag = Dictionary(uniqueKeysWithValues: ConfigTable.all.map { ($0.flag, $0) })
        for (env, message) in ConfigTable.removed {
            if let value = environment[env], !["", "false", "0", "no", "off"].contains(value.lowercased()) {
                throw ConfigError(message: message)
            }
        }
        for key in ConfigTable.all {
            if let value = environment[key.env] { values[key.env] = value }
        }
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            var flag = argument
            var value: String?
            if let eq = argument.firstIndex(of: "=") {
                flag = String(argument[..<eq])
                value = String(argument[argument.index(after: eq)...])
            }
            guard let key = byFlag[flag] else {
                throw ConfigError(message: "unknown option \(flag); see `gatehouse help` or the configuration table in docs/operators/configuration.md")
            }
            if value == nil {
                index += 1
                guard index < arguments.count else { throw ConfigError(message: "\(flag) needs a value") }
                value = arguments[index]
            }
            values[key.env] = value
            index += 1
        }
    }

    /// The key's value, or its default.
    public func string(_ key: ConfigKey) -> String? {
        values[key.env] ?? key.defaultValue
    }

    /// A required value.
    public func required(_ key: ConfigKey) throws -> String {
        guard let value = string(key), !value.isEmpty else {
            throw ConfigError(message: "\(key.env) (\(key.flag)) is required: \(key.help)")
        }
        return value
    }

    /// A required integer within the key's own `range` (any integer for a key without one).
    public func int(_ key: ConfigKey) throws -> Int {
        try int(key, in: key.range ?? Int.min...Int.max)
    }

    /// An integer within the key's own `range`, or nil when the key is unset or empty.
    public func optionalInt(_ key: ConfigKey) throws -> Int? {
        guard let text = string(key), !text.isEmpty else { return nil }
        return try int(key)
    }

    /// A required integer within `range`, for a key read with another range than its own
    /// (`GATEHOUSE_HTTP_PORT`: the gateway takes 0, an ephemeral port; the health check needs a
    /// real one).
    public func int(_ key: ConfigKey, in range: ClosedRange<Int>) throws -> Int {
        let text = try required(key)
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
            throw ConfigError(message: "\(key.env) (\(key.flag)) must be an integer in \(range.lowerBound)...\(range.upperBound), not \(key.secret ? "<secret>" : "'\(text)'")")
        }
        return value
    }

    /// A required boolean: `true`/`1`/`yes`/`on` or `false`/`0`/`no`/`off`.
    public func bool(_ key: ConfigKey) throws -> Bool {
        switch try required(key).lowercased() {
        case "true", "1", "yes", "on": return true
        case "false", "0", "no", "off": return false
        case let other: throw ConfigError(message: "\(key.env) (\(key.flag)) must be true or false, not '\(other)'")
        }
    }

    /// A comma-separated list, entries trimmed, empty ones dropped; [] when unset.
    public func list(_ key: ConfigKey) -> [String] {
        (string(key) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `GATEHOUSE_DURABILITY`: true for `power-loss`, false for `process-crash`.
    public func powerLossDurability() throws -> Bool {
        switch try required(ConfigTable.durability).lowercased() {
        case "process-crash": return false
        case "power-loss": return true
        case let other: throw ConfigError(message: "GATEHOUSE_DURABILITY (--durability) must be process-crash or power-loss, not '\(other)'")
        }
    }

    /// A required ZeroMQ endpoint: `tcp://`, `ipc://` or `inproc://`.
    public func endpoint(_ key: ConfigKey) throws -> String {
        let value = try required(key)
        guard value.hasPrefix("tcp://") || value.hasPrefix("ipc://") || value.hasPrefix("inproc://") else {
            throw ConfigError(message: "\(key.env) (\(key.flag)) must be a ZeroMQ endpoint like tcp://127.0.0.1:7001, not '\(value)'")
        }
        return value
    }

    /// A required list of ZeroMQ endpoints separated by commas (the instances of one service),
    /// each `tcp://`, `ipc://` or `inproc://`; returned as given.
    public func endpoints(_ key: ConfigKey) throws -> String {
        let value = try required(key)
        let list = Self.splitEndpoints(value)
        guard !list.isEmpty else { throw ConfigError(message: "\(key.env) (\(key.flag)) names no endpoint") }
        guard list.count <= 16 else { throw ConfigError(message: "\(key.env) (\(key.flag)) names \(list.count) endpoints; at most 16") }
        for endpoint in list where !(endpoint.hasPrefix("tcp://") || endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://")) {
            throw ConfigError(
                message: "\(key.env) (\(key.flag)) must be ZeroMQ endpoints like tcp://10.0.0.1:7001,tcp://10.0.0.2:7001, not '\(endpoint)'")
        }
        guard Set(list).count == list.count else { throw ConfigError(message: "\(key.env) (\(key.flag)) names an endpoint twice") }
        return value
    }

    /// The endpoints of a list setting (commas between, blanks ignored), as the balanced RPC
    /// client reads them.
    public static func splitEndpoints(_ value: String) -> [String] { BalancedRPCClient.split(value) }
}
