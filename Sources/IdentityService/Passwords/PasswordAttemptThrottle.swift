import CLegacyHashes
import Foundation
import IdentityPorts
import GatehouseSupport
import IdentityCore
import Synchronization

/// Per-account throttling of password checks (sign-in today; re-authentication and password
/// change will use the same one). It lives in the identity service, in memory, so it holds
/// whatever gateway an attempt comes through; each identity instance has its own table.
///
/// Keyed by the normalized email, hashed with a random per-process salt (no raw email is kept),
/// and counted *before* the user is looked up: an email that has no account is throttled
/// exactly like one that has, with the same error at the same moment.
///
/// Every attempt that gets past the check counts as a failure in advance (so a burst of
/// concurrent guesses cannot all slip in before the first one fails); a correct password clears
/// the key, and an attempt that could not be checked (hashing overloaded, database down) is
/// given back. After `threshold` failures, each further attempt waits: `baseDelay` after the
/// `threshold`-th failure, doubling with each failure after it, never more than `maxDelay`.
/// Refused attempts do not count, so the owner is never locked out for longer than `maxDelay`
/// by guesses alone. A key is forgotten `window` after its last failure. At most `capacity`
/// keys are held; when full, expired keys go first, then the least recently failed ones.
public final class PasswordAttemptThrottle: Sendable {
    /// The throttle's settings.
    public struct Settings: Sendable, Equatable {
        /// Failures allowed before attempts are delayed; 0 turns throttling off.
        public var threshold: Int
        /// How long a key's failures are remembered after its last one, in seconds.
        public var window: TimeInterval
        /// The wait after the `threshold`-th failure, in seconds; it doubles with each failure after it.
        public var baseDelay: TimeInterval
        /// The longest wait, in seconds.
        public var maxDelay: TimeInterval
        /// Most keys held at once.
        public var capacity: Int

        /// The account-wide tier: the same waits after ten times the failures (off when this is off).
        public var accountWide: Settings {
            var wide = self
            wide.threshold = threshold * 10
            return wide
        }

        /// 5 failures within 15 minutes, then 1 s doubling up to 5 minutes; 100 000 keys.
        public init(
            threshold: Int = 5, window: TimeInterval = 900, baseDelay: TimeInterval = 1, maxDelay: TimeInterval = 300,
            capacity: Int = 100_000
        ) {
            self.threshold = threshold
            self.window = window
            self.baseDelay = baseDelay
            self.maxDelay = maxDelay
            self.capacity = capacity
        }
    }

    /// A hashed email: 128 bits of a salted SHA-256.
    public struct Key: Hashable, Sendable {
        let high: UInt64
        let low: UInt64
    }

    struct Entry {
        /// Failures counted (attempts in flight included).
        var failures: Int
        /// When the last failure was counted (seconds since the reference date).
        var lastFailure: TimeInterval
    }

    /// The settings in force.
    public let settings: Settings
    private let clock: WallClock
    private let salt: [UInt8]
    private let entries: Mutex<[Key: Entry]>

    /// A throttle reading the time from `clock`.
    public init(settings: Settings = Settings(), clock: WallClock = .system) {
        self.settings = settings
        self.clock = clock
        var generator = SystemRandomNumberGenerator()
        salt = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        entries = Mutex([:])
    }

    /// Whether attempts are ever delayed.
    public var isEnabled: Bool { settings.threshold > 0 }

    /// The key of a normalized email, or of that email and a client address.
    public func key(normalizedEmail: String, client: String? = nil) -> Key {
        var input = salt
        input.append(contentsOf: Array(normalizedEmail.utf8))
        if let client {
            input.append(0)  // no email holds a NUL: "a@b" + "1.2.3.4" never equals another pair
            input.append(contentsOf: Array(client.utf8))
        }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = input.withUnsafeBytes { bytes in
            digest.withUnsafeMutableBufferPointer { out in
                EVP_Digest(bytes.baseAddress, bytes.count, out.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        precondition(ok == 1 && length == 32, "SHA-256 failed")
        func word(_ at: Int) -> UInt64 { digest[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        return Key(high: word(0), low: word(8))
    }

    /// Counts one attempt for `key` in advance, or refuses it with `tooManyAttempts` while the
    /// key must wait. Call `succeeded` after a correct password, `abandoned` when the password
    /// could not be checked; a wrong password needs nothing more.
    public func begin(_ key: Key) throws(IdentityError) {
        guard isEnabled else { return }
        let now = clock.now.timeIntervalSinceReferenceDate
        let wait: TimeInterval? = entries.withLock { entries in
            if var entry = entries[key], !isExpired(entry, now: now) {
                let until = entry.lastFailure + delay(afterFailures: entry.failures)
                // (A microsecond's tolerance: float sums of seconds must not refuse a due attempt.)
                if now < until - 1e-6 { return until - now }
                entry.failures += 1
                entry.lastFailure = now
                entries[key] = entry
                return nil
            }
            if entries[key] == nil, entries.count >= settings.capacity { evict(&entries, now: now) }
            entries[key] = Entry(failures: 1, lastFailure: now)
            return nil
        }
        if let wait { throw IdentityError.tooManyAttempts(retryAfterSeconds: max(1, Int((wait - 1e-6).rounded(.up)))) }
    }

    /// The password was right: the key starts afresh.
    public func succeeded(_ key: Key) {
        guard isEnabled else { return }
        _ = entries.withLock { $0.removeValue(forKey: key) }
    }

    /// The attempt counted by `begin` did not check a password (the hash could not run, the
    /// database failed): it is given back.
    public func abandoned(_ key: Key) {
        guard isEnabled else { return }
        entries.withLock { entries in
            guard var entry = entries[key] else { return }
            entry.failures -= 1
            if entry.failures <= 0 { entries.removeValue(forKey: key) } else { entries[key] = entry }
        }
    }

    /// Runs `check` (a password verification) under the throttle: refused while `key` must wait;
    /// `invalidCredentials` leaves the failure counted, success clears the key, any other error
    /// gives the attempt back.
    public func guarding<T>(_ key: Key, _ check: () async throws -> T) async throws -> T {
        try begin(key)
        do {
            let result = try await check()
            succeeded(key)
            return result
        } catch IdentityError.invalidCredentials {
            throw IdentityError.invalidCredentials
        } catch {
            abandoned(key)
            throw error
        }
    }

    /// Keys held now (for tests and metrics).
    public var count: Int { entries.withLock { $0.count } }

    /// How long a key with `failures` must wait after its last one.
    func delay(afterFailures failures: Int) -> TimeInterval {
        guard failures >= settings.threshold else { return 0 }
        let doublings = failures - settings.threshold
        guard doublings < 62 else { return settings.maxDelay }
        return min(settings.maxDelay, settings.baseDelay * Double(1 << doublings))
    }

    /// A key is forgotten once `window` has passed since its last failure and it no longer waits.
    func isExpired(_ entry: Entry, now: TimeInterval) -> Bool {
        now >= entry.lastFailure + max(settings.window, delay(afterFailures: entry.failures)) - 1e-6
    }

    /// Makes room: drops expired keys; if that frees less than an eighth of the table, drops
    /// keys until it does: first those below the threshold, then those at or past it, the least
    /// recently failed first. (A batch, so a full table is not scanned on every new key; keys
    /// that wait go last, so spraying new emails does not easily wipe a throttled account.)
    private func evict(_ entries: inout [Key: Entry], now: TimeInterval) {
        entries = entries.filter { !isExpired($0.value, now: now) }
        let target = settings.capacity - max(1, settings.capacity / 8)
        guard entries.count > target else { return }
        let threshold = settings.threshold
        let order = entries.sorted { a, b in
            let (aWaits, bWaits) = (a.value.failures >= threshold, b.value.failures >= threshold)
            return aWaits != bWaits ? !aWaits : a.value.lastFailure < b.value.lastFailure
        }
        for (key, _) in order.prefix(entries.count - target) { entries.removeValue(forKey: key) }
    }
}
