import Foundation

/// What a run drives.
public enum Scenario: String, CaseIterable, Sendable, Codable {
    /// `POST /v1/accounts` with a fresh unique email every request.
    case signup
    /// `POST /v1/sessions` round-robin over a pool of users made during setup.
    case signin
    /// `GET /v1/me` with access tokens obtained during setup.
    case me
    /// `POST /v1/sessions/refresh`; each virtual user rotates its own refresh token.
    case refresh
    /// A weighted mix of the four operations above (see ``MixWeights``).
    case mixed
    /// `GET <path>` expecting 200: the bare cost of a route (ceiling comparisons).
    case rawGet = "raw-get"
    /// `POST /v1/sessions/provider` with a fresh ES256 ID token (signed with `providerKey`) every
    /// request, round-robin over `setupUsers` subjects: the first request of a subject creates
    /// its user, later ones sign in (no password hash on this path).
    case provider
    /// `GET /v1/me/events` streams held open while `PATCH /v1/me` changes their users
    /// (``StreamLoadRunner``, configured by ``StreamLoadConfiguration``).
    case stream
}

/// One kind of request the generator sends.
public enum Operation: String, CaseIterable, Sendable, Codable, Comparable {
    case signup, signin, me, refresh
    case rawGet = "raw-get"
    case provider

    /// Orders operations as `allCases` lists them.
    public static func < (lhs: Operation, rhs: Operation) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Relative weights of the operations in the `mixed` scenario.
public struct MixWeights: Sendable, Equatable, Codable {
    /// Weight of `GET /v1/me`.
    public var me: Int
    /// Weight of `POST /v1/sessions/refresh`.
    public var refresh: Int
    /// Weight of sign-ins (`POST /v1/sessions`).
    public var signin: Int
    /// Weight of sign-ups (`POST /v1/accounts`).
    public var signup: Int

    /// Weights as given; the defaults are the `default` mix.
    public init(me: Int = 70, refresh: Int = 20, signin: Int = 8, signup: Int = 2) {
        self.me = me
        self.refresh = refresh
        self.signin = signin
        self.signup = signup
    }

    /// 70 me, 20 refresh, 8 sign-in, 2 sign-up: mostly reads.
    public static let `default` = MixWeights()

    /// Parses `me=70,refresh=20,signin=8,signup=2`; operations not named get weight 0.
    public init(parsing text: String) throws {
        self.init(me: 0, refresh: 0, signin: 0, signup: 0)
        for part in text.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, let weight = Int(pair[1]), weight >= 0 else {
                throw LoadError.invalidConfiguration("bad mix entry '\(part)': expected NAME=WEIGHT with WEIGHT >= 0")
            }
            switch pair[0] {
            case "me": me = weight
            case "refresh": refresh = weight
            case "signin": signin = weight
            case "signup": signup = weight
            default:
                throw LoadError.invalidConfiguration("unknown operation '\(pair[0])' in mix (use me, refresh, signin, signup)")
            }
        }
        guard total > 0 else { throw LoadError.invalidConfiguration("mix weights must not all be 0") }
    }

    /// The sum of the weights; an operation is picked with probability weight / total.
    public var total: Int { me + refresh + signin + signup }

    /// Operations with a positive weight, in a fixed order, with their weights.
    var entries: [(Operation, Int)] {
        [(.me, me), (.refresh, refresh), (.signin, signin), (.signup, signup)].filter { $0.1 > 0 }
    }

    /// Picks an operation for a number in `0..<total`.
    func pick(_ roll: Int) -> Operation {
        var rest = roll
        for (operation, weight) in entries {
            if rest < weight { return operation }
            rest -= weight
        }
        return entries.last!.0
    }

    /// The operations with a positive weight, as `me=70,refresh=20,...` (shown in the report).
    public var description: String {
        entries.map { "\($0.0.rawValue)=\($0.1)" }.joined(separator: ",")
    }
}

/// Which HTTP client sends the load.
public enum HTTPEngine: String, Sendable, CaseIterable {
    /// Keep-alive connections on non-blocking sockets, each virtual user a task on the event-loop
    /// thread that owns its connection (`LoopHTTPClient`): the least CPU per request.
    case loop
    /// Keep-alive connections on SwiftNIO (`LeanHTTPClient`).
    case nio
    /// AsyncHTTPClient with its connection pool; also what `https://` targets use.
    case asyncHTTPClient = "async-http-client"
}

/// Everything a run needs. The CLI fills it from flags; tests build it directly.
public struct LoadConfiguration: Sendable {
    /// The longest `duration` accepted, in seconds.
    public static let maxDuration: Double = 3600
    /// The longest `warmup` accepted, in seconds.
    public static let maxWarmup: Double = 600
    /// The longest `timeout` accepted, in seconds.
    public static let maxTimeout: Double = 600
    /// The most virtual users accepted.
    public static let maxConcurrency = 10_000
    /// The most setup users accepted.
    public static let maxSetupUsers = 100_000

    /// Base URL of the gateway, e.g. `http://127.0.0.1:8080`.
    public var url: String
    /// What each virtual user sends.
    public var scenario: Scenario
    /// Virtual users, each with one request in flight; also the connection pool size.
    public var concurrency: Int
    /// Measured duration in seconds (the run stops issuing requests after it).
    public var duration: Double
    /// Maximum number of measured requests; the run stops at whichever bound comes first.
    public var maxRequests: Int?
    /// Seconds of load before measuring starts; not recorded.
    public var warmup: Double
    /// Users created during setup (signin, me, refresh, mixed); `nil` means one per virtual user.
    public var setupUsers: Int?
    /// Per-request timeout in seconds.
    public var timeout: Double
    /// Without it, only loopback targets are accepted.
    public var allowRemote: Bool
    /// Path for `raw-get`.
    public var path: String
    /// Optional bearer token sent by `raw-get`.
    public var bearer: String?
    /// Weights of the operations in the `mixed` scenario.
    public var mix: MixWeights
    /// Tag that makes this run's emails unique: `load-<runID>-<n>@example.com`.
    public var runID: String
    /// Password used for every account this run creates.
    public var password: String
    /// Seconds a virtual user waits after a 503 or 429 before its next request, as a client that
    /// honours `Retry-After` does; 0 (the default) retries at once. The wait is not measured.
    public var busyBackoff: Double = 0
    /// The HTTP client: `loop` (the default, see `LoopHTTPClient`), `nio` (`LeanHTTPClient`) or
    /// `asyncHTTPClient`. `https://` targets always use AsyncHTTPClient.
    public var engine: HTTPEngine = .loop
    /// Event-loop threads of the `loop` engine; virtual users are spread over them.
    public var threads = 1
    /// The most `threads` accepted.
    public static let maxThreads = 64
    /// The P-256 private key (PEM) the `provider` scenario signs its ID tokens with; the server
    /// must trust its JWKS (`gatehouse-load --print-provider-jwks`) as `google.com`'s.
    public var providerKeyPEM: String?
    /// The `aud` of the `provider` scenario's tokens (a client id the server accepts).
    public var providerAudience = "gatehouse-bench"

    /// A configuration with the CLI's defaults (64 users for 10 s against
    /// `http://127.0.0.1:8080`), a new run id and a new password.
    public init(
        url: String = "http://127.0.0.1:8080",
        scenario: Scenario,
        concurrency: Int = 64,
        duration: Double = 10,
        maxRequests: Int? = nil,
        warmup: Double = 0,
        setupUsers: Int? = nil,
        timeout: Double = 10,
        allowRemote: Bool = false,
        path: String = "/healthz",
        bearer: String? = nil,
        mix: MixWeights = .default,
        runID: String = LoadConfiguration.makeRunID(),
        password: String = LoadConfiguration.makePassword()
    ) {
        self.url = url
        self.scenario = scenario
        self.concurrency = concurrency
        self.duration = duration
        self.maxRequests = maxRequests
        self.warmup = warmup
        self.setupUsers = setupUsers
        self.timeout = timeout
        self.allowRemote = allowRemote
        self.path = path
        self.bearer = bearer
        self.mix = mix
        self.runID = runID
        self.password = password
    }

    /// Eight random lowercase hex digits.
    public static func makeRunID() -> String {
        String(UInt32.random(in: .min ... .max), radix: 16).leftPadded(to: 8)
    }

    /// A random 24-character password (letters, digits, symbols): strong enough for any policy.
    public static func makePassword() -> String {
        let alphabet = Array("abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        var password = "Ld!"
        for _ in 0..<21 { password.append(alphabet.randomElement()!) }
        return password
    }

    /// Users to create during setup.
    public var effectiveSetupUsers: Int { setupUsers ?? concurrency }

    /// Throws a clear message for any value out of range.
    public func validate() throws {
        guard (1...Self.maxConcurrency).contains(concurrency) else {
            throw LoadError.invalidConfiguration("--concurrency must be in 1...\(Self.maxConcurrency)")
        }
        guard (1...Self.maxThreads).contains(threads) else {
            throw LoadError.invalidConfiguration("--threads must be in 1...\(Self.maxThreads)")
        }
        guard busyBackoff >= 0, busyBackoff <= 60 else {
            throw LoadError.invalidConfiguration("--busy-backoff must be in 0...60 seconds")
        }
        guard duration > 0, duration <= Self.maxDuration else {
            throw LoadError.invalidConfiguration("--duration must be > 0 and <= \(Int(Self.maxDuration)) seconds")
        }
        guard warmup >= 0, warmup <= Self.maxWarmup else {
            throw LoadError.invalidConfiguration("--warmup must be in 0...\(Int(Self.maxWarmup)) seconds")
        }
        guard timeout > 0, timeout <= Self.maxTimeout else {
            throw LoadError.invalidConfiguration("--timeout must be > 0 and <= \(Int(Self.maxTimeout)) seconds")
        }
        if let maxRequests, maxRequests < 1 {
            throw LoadError.invalidConfiguration("--requests must be >= 1")
        }
        if let setupUsers, !(1...Self.maxSetupUsers).contains(setupUsers) {
            throw LoadError.invalidConfiguration("--setup-users must be in 1...\(Self.maxSetupUsers)")
        }
        guard path.hasPrefix("/") else {
            throw LoadError.invalidConfiguration("--path must start with '/'")
        }
        guard mix.total > 0 else { throw LoadError.invalidConfiguration("mix weights must not all be 0") }
        guard !runID.isEmpty, runID.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
            throw LoadError.invalidConfiguration("run id must be letters, digits and '-'")
        }
    }
}

/// Why a run could not start or could not finish its setup.
public enum LoadError: Error, Equatable, CustomStringConvertible {
    case invalidConfiguration(String)
    case invalidURL(String)
    /// The target is not loopback and `allowRemote` is false. Nothing was sent.
    case remoteTargetRefused(host: String, reason: String)
    case setupFailed(String)

    /// The message the CLI prints.
    public var description: String {
        switch self {
        case .invalidConfiguration(let message): return "invalid configuration: \(message)"
        case .invalidURL(let message): return "invalid URL: \(message)"
        case .remoteTargetRefused(let host, let reason):
            return "refusing to send load to '\(host)': \(reason). Only loopback targets (127.0.0.0/8, ::1, localhost) "
                + "are allowed unless --allow-remote is given; load-test only servers you own."
        case .setupFailed(let message): return "setup failed: \(message)"
        }
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
