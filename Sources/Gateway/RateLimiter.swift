import Foundation
import GatehouseSupport
import Synchronization

/// The kinds of request limited per client address, each with its own budget.
public enum RateLimitClass: Int, CaseIterable, Sendable {
    /// `POST /v1/accounts`.
    case signUp
    /// `POST /v1/sessions`.
    case signIn
    /// `POST /v1/password-strength`.
    case passwordStrength
    /// `POST /v1/sessions/refresh`.
    case refresh
    /// Anonymous sign-up (no route yet; ready for it).
    case anonymousSignUp
    /// `POST /v1/password-reset`.
    case passwordReset

    /// The metric label: `sign_up`, `sign_in`, `password_strength`, `refresh`, `anonymous_sign_up`,
    /// `password_reset`.
    public var label: String {
        switch self {
        case .signUp: "sign_up"
        case .signIn: "sign_in"
        case .passwordStrength: "password_strength"
        case .refresh: "refresh"
        case .anonymousSignUp: "anonymous_sign_up"
        case .passwordReset: "password_reset"
        }
    }
}

/// One class's budget per client address: a token bucket holding at most `burst` requests,
/// refilled at `perSecond`.
public struct RateLimit: Sendable, Equatable, CustomStringConvertible {
    /// Requests a second, sustained.
    public var perSecond: Double
    /// Requests allowed at once after a quiet spell.
    public var burst: Int

    /// A budget of `perSecond` sustained, `burst` at once.
    public init(perSecond: Double, burst: Int) {
        self.perSecond = perSecond
        self.burst = burst
    }

    /// Parses `off`, or `N/UNIT` with an optional ` burst=B` (UNIT: `s`, `min` or `h`; B
    /// defaults to N): `60/min burst=20`. nil (off) for `off`; throws a description otherwise.
    public static func parse(_ text: String) throws(RateLimitSyntaxError) -> RateLimit? {
        let words = text.lowercased().split(whereSeparator: { $0 == " " || $0 == "," })
        if words == ["off"] { return nil }
        guard (1...2).contains(words.count) else { throw RateLimitSyntaxError(text: text) }
        let rate = words[0].split(separator: "/")
        guard rate.count == 2, let count = Int(rate[0]), count > 0, count <= 1_000_000 else { throw RateLimitSyntaxError(text: text) }
        let seconds: Double
        switch rate[1] {
        case "s", "sec", "second": seconds = 1
        case "m", "min", "minute": seconds = 60
        case "h", "hour": seconds = 3600
        default: throw RateLimitSyntaxError(text: text)
        }
        var burst = count
        if words.count == 2 {
            guard words[1].hasPrefix("burst="), let b = Int(words[1].dropFirst(6)), b > 0, b <= 1_000_000 else {
                throw RateLimitSyntaxError(text: text)
            }
            burst = b
        }
        return RateLimit(perSecond: Double(count) / seconds, burst: burst)
    }

    /// `N/s burst=B` (the rate per second, which may be fractional).
    public var description: String { "\(perSecond)/s burst=\(burst)" }
}

/// A limit that does not parse.
public struct RateLimitSyntaxError: Error, CustomStringConvertible {
    /// The value as given.
    public let text: String
    /// What is wrong.
    public var description: String { "'\(text)' is not a limit like `60/min burst=20` or `off`" }
}

/// The per-client-address limits of the gateway.
public struct RateLimits: Sendable, Equatable {
    /// Each class's budget; a class without one is not limited.
    public var limits: [RateLimitClass: RateLimit]
    /// Most (class, address) buckets held at once; past it, idle buckets are dropped, then the
    /// least recently used.
    public var maxClients: Int

    /// The defaults: sign-in 60/min burst 20, sign-up 20/min burst 10, password strength
    /// 120/min burst 30, refresh 600/min burst 120, anonymous sign-up 20/min burst 10, password
    /// reset 10/h burst 5; 100 000 buckets.
    public static let defaults = RateLimits(
        limits: [
            .signIn: RateLimit(perSecond: 1, burst: 20),
            .signUp: RateLimit(perSecond: 20.0 / 60, burst: 10),
            .passwordStrength: RateLimit(perSecond: 2, burst: 30),
            .refresh: RateLimit(perSecond: 10, burst: 120),
            .anonymousSignUp: RateLimit(perSecond: 20.0 / 60, burst: 10),
            .passwordReset: RateLimit(perSecond: 10.0 / 3600, burst: 5),
        ],
        maxClients: 100_000)

    /// No limit at all.
    public static let off = RateLimits(limits: [:], maxClients: 0)

    /// These budgets, at most `maxClients` buckets.
    public init(limits: [RateLimitClass: RateLimit], maxClients: Int) {
        self.limits = limits
        self.maxClients = maxClients
    }
}

/// Token buckets per (class, client address), in shards that each have their own lock, so
/// requests from different addresses rarely wait for each other. `admit` allocates nothing once
/// a bucket exists; a bucket that has refilled is dropped when room is needed, which changes
/// nothing for its client (a missing bucket is a full one).
final class ClientRateLimiter: Sendable {
    struct Key: Hashable {
        var high: UInt64
        var low: UInt64
        var kind: UInt8
    }

    struct Bucket {
        var tokens: Double
        var updated: TimeInterval
    }

    final class Shard: Sendable {
        let buckets: Mutex<[Key: Bucket]>
        init(reserve: Int) {
            var dictionary: [Key: Bucket] = [:]
            dictionary.reserveCapacity(reserve)
            buckets = Mutex(dictionary)
        }
    }

    static let shardCount = 16
    /// Each class's budget by raw value (nil: not limited): an array, not a dictionary, on the hot path.
    private let limits: [RateLimit?]
    private let shards: [Shard]
    private let perShard: Int
    private let seed: UInt64
    private let clock: WallClock

    init(_ settings: RateLimits, clock: WallClock) {
        limits = RateLimitClass.allCases.map { settings.limits[$0] }
        perShard = max(1, settings.maxClients / Self.shardCount)
        shards = (0..<Self.shardCount).map { _ in Shard(reserve: min(1024, settings.maxClients / Self.shardCount)) }
        seed = UInt64.random(in: .min ... .max)
        self.clock = clock
    }

    /// Takes one request from `address`'s bucket for `kind`: 0 when admitted, else the whole
    /// seconds (at least 1) until one is.
    func admit(_ kind: RateLimitClass, _ address: IPAddress) -> Int {
        guard let limit = limits[kind.rawValue] else { return 0 }
        // An IPv6 client is its /64: one subscriber commonly holds a whole /64, and could
        // otherwise take a fresh bucket (and push out others') with each address in it.
        let low = address.isIPv4 ? address.low : 0
        let key = Key(high: address.high, low: low, kind: UInt8(kind.rawValue))
        var mixed = (address.high ^ low.byteSwapped ^ UInt64(kind.rawValue) ^ seed) &* 0x9E37_79B9_7F4A_7C15
        mixed ^= mixed >> 29
        let shard = shards[Int(truncatingIfNeeded: mixed >> 60) & (Self.shardCount - 1)]
        let now = clock.now.timeIntervalSinceReferenceDate
        let wait: Double = shard.buckets.withLock { buckets in
            if let index = buckets.index(forKey: key) {
                return Self.take(&buckets.values[index], limit: limit, now: now)
            }
            if buckets.count >= perShard { evict(&buckets, now: now) }
            buckets[key] = Bucket(tokens: Double(limit.burst) - 1, updated: now)
            return 0
        }
        return wait <= 0 ? 0 : max(1, Int((wait - 1e-6).rounded(.up)))
    }

    /// Refills `bucket` up to now and takes a token: 0, or the seconds until a token is there.
    static func take(_ bucket: inout Bucket, limit: RateLimit, now: TimeInterval) -> Double {
        // A wall clock stepped back refills nothing (and does not freeze the bucket).
        let elapsed = max(0, now - bucket.updated)
        bucket.tokens = min(Double(limit.burst), bucket.tokens + elapsed * limit.perSecond)
        bucket.updated = now
        // (A hair under 1 counts as 1: 30 s at 1/30 a second must make a whole request.)
        if bucket.tokens >= 1 - 1e-9 {
            bucket.tokens -= 1
            return 0
        }
        return (1 - bucket.tokens) / limit.perSecond
    }

    /// Makes room in a full shard: drops the buckets that have refilled (no different from
    /// none); if that frees less than an eighth, the least recently used until it does.
    private func evict(_ buckets: inout [Key: Bucket], now: TimeInterval) {
        let limits = self.limits
        buckets = buckets.filter { key, bucket in
            guard let limit = limits[Int(key.kind)] else { return false }
            return bucket.tokens + max(0, now - bucket.updated) * limit.perSecond < Double(limit.burst)
        }
        let target = perShard - max(1, perShard / 8)
        guard buckets.count > target else { return }
        for (key, _) in buckets.sorted(by: { $0.value.updated < $1.value.updated }).prefix(buckets.count - target) {
            buckets.removeValue(forKey: key)
        }
    }

    /// Buckets held now (for tests).
    var count: Int { shards.reduce(0) { $0 + $1.buckets.withLock { $0.count } } }
}
