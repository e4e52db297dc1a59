import Foundation
import GatehouseSupport
import GatehouseContracts
import JWTKit
import Synchronization

/// The token service's public keys, fetched from `token.jwks`.
///
/// - The document is served from cache for `ttl`, then fetched again.
/// - A token with an unknown `kid` causes a fetch, at most once per `minRefetchInterval`
///   (so garbage `kid`s cannot make the gateway hammer the token service).
/// - Only asymmetric signing keys are used: ES256 (EC P-256), EdDSA (OKP Ed25519), RS256 (RSA).
///   Symmetric (`oct`) keys and other algorithms in the document are ignored.
actor JWKSCache {
    /// Algorithms a token may be signed with.
    static let allowedAlgorithms: Set<String> = ["ES256", "EdDSA", "RS256"]

    private let fetch: @Sendable () async throws -> String
    private let clock: WallClock
    private let ttl: TimeInterval
    private let minRefetchInterval: TimeInterval

    private var keys = JWTKeyCollection()
    private var algorithmByKID: [String: String] = [:]
    private var document: String?
    private var fetchedAt: Date?
    private var lastUnknownKIDFetch: Date?
    private var lastStaleFetch: Date?
    private var inflight: Task<KeySet, any Error>?
    /// How many times the token service was asked for the JWKS (for tests and metrics).
    private(set) var fetchCount = 0

    /// The installed keys, readable without entering the actor: every request looks its key
    /// up, and the actor hop was the larger part of that.
    private struct Snapshot {
        var keys: JWTKeyCollection
        var algorithmByKID: [String: String]
        var fetchedAt: Date
    }
    private nonisolated let snapshot = Mutex<Snapshot?>(nil)

    init(fetch: @escaping @Sendable () async throws -> String, clock: WallClock, ttl: Duration, minRefetchInterval: Duration) {
        self.fetch = fetch
        self.clock = clock
        self.ttl = ttl.seconds
        self.minRefetchInterval = minRefetchInterval.seconds
    }

    /// The JWKS document as the token service published it.
    func currentDocument() async throws -> String {
        if let document, !isStale { return document }
        do {
            try await refresh()
        } catch {
            if let document { return document }  // serve stale rather than fail
            throw error
        }
        return document ?? #"{"keys":[]}"#
    }

    /// The key collection and expected algorithm for `kid` when the installed set is fresh and
    /// knows it; nil sends the caller to `key(for:)` (fetch rules, rate limits).
    nonisolated func cachedKey(for kid: String) -> (JWTKeyCollection, String)? {
        let now = clock.now
        return snapshot.withLock { snapshot in
            guard let snapshot, now.timeIntervalSince(snapshot.fetchedAt) < ttl, let alg = snapshot.algorithmByKID[kid] else {
                return nil
            }
            return (snapshot.keys, alg)
        }
    }

    /// The key collection and expected algorithm for `kid`, or nil when the kid is unknown even after
    /// an allowed refetch.
    func key(for kid: String) async -> (JWTKeyCollection, String)? {
        // A fetch already under way (another request's: many arrive at once at a cold start or
        // after a rotation) is waited for, whatever the rate limits: its set may hold the key.
        if inflight != nil { try? await refresh() }
        // A stale set is refreshed, but while the token service is down the old keys keep
        // working and the attempts are rate limited like unknown-kid fetches.
        if (fetchedAt == nil || isStale) && mayFetch(&lastStaleFetch) { try? await refresh() }
        if let alg = algorithmByKID[kid] { return (keys, alg) }
        if inflight != nil { try? await refresh() }
        if let alg = algorithmByKID[kid] { return (keys, alg) }
        guard mayFetch(&lastUnknownKIDFetch) else { return nil }
        try? await refresh()
        return algorithmByKID[kid].map { (keys, $0) }
    }

    /// True (and the attempt recorded in `last`) when the previous attempt is older than `minRefetchInterval`.
    private func mayFetch(_ last: inout Date?) -> Bool {
        let now = clock.now
        if let previous = last, now.timeIntervalSince(previous) < minRefetchInterval { return false }
        last = now
        return true
    }

    private var isStale: Bool {
        guard let fetchedAt else { return true }
        return clock.now.timeIntervalSince(fetchedAt) >= ttl
    }

    /// A fetched and parsed document, ready to install.
    struct KeySet: Sendable {
        var keys: JWTKeyCollection
        var algorithmByKID: [String: String]
        var document: String
    }

    /// Fetches once even when many callers ask at the same time.
    private func refresh() async throws {
        let task: Task<KeySet, any Error>
        if let inflight {
            task = inflight
        } else {
            let fetch = self.fetch
            task = Task { try await Self.parse(try await fetch()) }
            inflight = task
            fetchCount += 1
        }
        defer { if inflight == task { inflight = nil } }
        let set = try await task.value
        // Every waiter installs the same set: synchronous and idempotent.
        keys = set.keys
        algorithmByKID = set.algorithmByKID
        document = set.document
        let now = clock.now
        fetchedAt = now
        snapshot.withLock { $0 = Snapshot(keys: set.keys, algorithmByKID: set.algorithmByKID, fetchedAt: now) }
    }

    static func parse(_ text: String) async throws -> KeySet {
        guard let root = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let list = root["keys"] as? [[String: Any]]
        else {
            throw RPCError(.internal, "the JWKS document does not parse")
        }
        let collection = JWTKeyCollection()
        var algorithms: [String: String] = [:]
        for entry in list {
            guard let kid = entry["kid"] as? String, let alg = Self.algorithm(of: entry) else { continue }
            if let use = entry["use"] as? String, use != "sig" { continue }
            guard let data = try? JSONSerialization.data(withJSONObject: entry),
                let jwk = try? JSONDecoder().decode(JWK.self, from: data),
                (try? await collection.add(jwk: jwk)) != nil
            else { continue }
            algorithms[kid] = alg
        }
        return KeySet(keys: collection, algorithmByKID: algorithms, document: text)
    }

    /// The algorithm a JWK is used with, if it is one we accept.
    static func algorithm(of jwk: [String: Any]) -> String? {
        let kty = jwk["kty"] as? String
        let derived: String? =
            switch (kty, jwk["crv"] as? String) {
            case ("EC", "P-256"): "ES256"
            case ("OKP", "Ed25519"): "EdDSA"
            case ("RSA", _): "RS256"
            default: nil
            }
        guard let derived else { return nil }
        if let declared = jwk["alg"] as? String, declared != derived { return nil }
        return allowedAlgorithms.contains(derived) ? derived : nil
    }
}

extension Duration {
    var seconds: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
