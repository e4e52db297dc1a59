import CLegacyHashes
import Foundation
import IdentityPorts
import GatehouseSupport
import IdentityCore
import Synchronization

/// The resume handles of `migration_required` answers, in the identity service's memory.
///
/// A handle is 32 random bytes (base64url); only its SHA-256 is kept, with the anonymous user and
/// session it was given to, the existing user it resumes a sign-in to, and when it expires. It is
/// taken out under the lock, so it serves at most once: of two concurrent resumes exactly one
/// gets it. Held in memory, handles do not survive a restart of the identity service (the app
/// then signs in again). At most `capacity` are held; past it, expired ones are dropped first,
/// then the oldest. With a shared store (several instances) they live in the database instead
/// (`SharedResumeHandles`, ResumeHandles+Shared.swift).
public final class ResumeHandles: Sendable {
    /// What a handle resumes.
    public struct Entry: Sendable, Equatable {
        /// The anonymous user that signed in.
        public var anonymousUserID: UserID
        /// The anonymous user's session that got the handle; only it may resume.
        public var sessionID: String
        /// The existing user whose credentials were verified.
        public var targetUserID: UserID
        /// The target's password hash when they were: a resume after a password change fails.
        public var targetPasswordHash: String?
        /// The provider identity (`provider`, `subject`) whose verified token named the target,
        /// for a provider sign-in: a resume after it was unlinked fails, and the new session's
        /// `amr` is the provider. nil for a password sign-in.
        public var providerIdentity: ProviderIdentity? = nil
        /// When the handle stops working.
        public var expiresAt: Date
    }

    /// A verified provider identity a handle carries.
    public struct ProviderIdentity: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        /// The provider id (`apple.com`, `google.com`, `oidc.<name>`).
        public var provider: String
        /// The provider's subject (`sub`).
        public var subject: String
        /// Apple's refresh token from the sign-in's authorization code, kept once the resume
        /// succeeds (in memory only, with the handle).
        public var appleRefreshToken: String? = nil
        /// The client id Apple's token was issued to.
        public var appleClientID: String? = nil

        /// The identity (`provider`, `subject`).
        public init(provider: String, subject: String) {
            self.provider = provider
            self.subject = subject
        }

        /// The identity, never Apple's token.
        public var description: String {
            "ProviderIdentity(provider: \(provider), subject: \(subject), appleRefreshToken: \(appleRefreshToken == nil ? "nil" : "<redacted>"))"
        }
        /// As `description`.
        public var debugDescription: String { description }
        /// As `description`: no token in a dump or a test failure.
        public var customMirror: Mirror {
            Mirror(self, children: ["provider": provider, "subject": subject, "appleRefreshToken": appleRefreshToken == nil ? "nil" : "<redacted>"])
        }
    }

    /// How long a handle works.
    public let ttl: TimeInterval
    /// The most handles held at once.
    public let capacity: Int
    private let entries = Mutex<[Digest: Entry]>([:])

    /// The default lifetime of a handle (`GATEHOUSE_MIGRATION_RESUME_TTL`), in seconds.
    public static let defaultTTL: TimeInterval = 300

    /// Handles that work for `ttl` seconds, at most `capacity` at once.
    public init(ttl: TimeInterval = ResumeHandles.defaultTTL, capacity: Int = 10_000) {
        self.ttl = ttl
        self.capacity = max(1, capacity)
    }

    /// A new handle resuming `anonymousUserID`'s sign-in (on `sessionID`) to `target`, whose
    /// credentials were just verified; it works until `now + ttl`.
    public func issue(
        anonymousUserID: UserID, sessionID: String, target: UserRecord, providerIdentity: ProviderIdentity? = nil, now: Date
    ) -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let handle = Base64URL.encode(Data(bytes))
        let entry = Entry(
            anonymousUserID: anonymousUserID, sessionID: sessionID, targetUserID: target.id, targetPasswordHash: target.passwordHash,
            providerIdentity: providerIdentity, expiresAt: now + ttl)
        let key = Self.digest(handle)
        entries.withLock { entries in
            if entries.count >= capacity { Self.makeRoom(&entries, capacity: capacity, now: now) }
            entries[key] = entry
        }
        return handle
    }

    /// Takes the handle out when it is known, unexpired and was given to `userID` on `sessionID`;
    /// nil otherwise. A handle presented by another session stays (its owner may still use it);
    /// an expired one is dropped.
    public func take(_ handle: String, userID: UserID, sessionID: String, now: Date) -> Entry? {
        guard !handle.isEmpty, handle.utf8.count <= 128 else { return nil }
        let key = Self.digest(handle)
        return entries.withLock { entries -> Entry? in
            guard let entry = entries[key] else { return nil }
            guard now < entry.expiresAt else {
                entries.removeValue(forKey: key)
                return nil
            }
            guard entry.anonymousUserID == userID, entry.sessionID == sessionID else { return nil }
            entries.removeValue(forKey: key)
            return entry
        }
    }

    /// Handles held now (for tests).
    public var count: Int { entries.withLock { $0.count } }

    /// Drops expired handles; if none were, the oldest eighth (by expiry) so `issue` has room.
    private static func makeRoom(_ entries: inout [Digest: Entry], capacity: Int, now: Date) {
        entries = entries.filter { now < $0.value.expiresAt }
        guard entries.count >= capacity else { return }
        let oldest = entries.sorted { $0.value.expiresAt < $1.value.expiresAt }.prefix(max(1, capacity / 8))
        for (key, _) in oldest { entries.removeValue(forKey: key) }
    }

    /// A handle's SHA-256.
    struct Digest: Hashable, Sendable {
        let words: (UInt64, UInt64, UInt64, UInt64)
        static func == (a: Digest, b: Digest) -> Bool {
            a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
        }
        func hash(into hasher: inout Hasher) {
            hasher.combine(words.0)
            hasher.combine(words.1)
            hasher.combine(words.2)
            hasher.combine(words.3)
        }
    }

    static func digest(_ handle: String) -> Digest {
        let input = Array(handle.utf8)
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = input.withUnsafeBytes { bytes in
            out.withUnsafeMutableBufferPointer { EVP_Digest(bytes.baseAddress, bytes.count, $0.baseAddress, &length, EVP_sha256(), nil) }
        }
        precondition(ok == 1 && length == 32, "SHA-256 failed")
        func word(_ at: Int) -> UInt64 { out[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        return Digest(words: (word(0), word(8), word(16), word(24)))
    }
}
