import AsyncHTTPClient
import Foundation
import Logging
import Synchronization

/// One provider's signing keys, fetched from its JWKS (found by discovery for a generic OpenID
/// Connect provider) and cached.
///
/// - The set is kept for the response's `Cache-Control: max-age`, clamped to
///   `[minimumMaxAge, maximumMaxAge]` (`defaultMaxAge` when the provider says nothing).
/// - A `kid` the set does not know causes one refetch (a provider rotated its keys), at most
///   once per `unknownKeyRefetchInterval`: a flood of tokens with made-up `kid`s costs the
///   provider one request per interval, not one per token.
/// - Callers arriving while a fetch is under way wait for that fetch; there is never more than
///   one in flight.
/// - Each fetch has a deadline (`fetchTimeout`); an unreachable, failing or hanging provider
///   gives `provider_unavailable` by then. An expired set is not used while its provider is down.
///
/// Time (what is fresh, when a refetch is allowed) is the `now` each caller passes: the
/// verifier's injected clock, so tests move it by hand.
public actor JWKSCache {
    /// The cache's limits.
    public struct Policy: Sendable, Equatable {
        /// The deadline of one fetch (connect, head and body).
        public var fetchTimeout: Duration
        /// Shortest time a set is kept, whatever `max-age` says (`no-cache` included).
        public var minimumMaxAge: TimeInterval
        /// Longest time a set is kept, whatever `max-age` says.
        public var maximumMaxAge: TimeInterval
        /// How long a set is kept when the response has no `max-age`.
        public var defaultMaxAge: TimeInterval
        /// Least time between two refetches caused by an unknown `kid`.
        public var unknownKeyRefetchInterval: TimeInterval
        /// Largest JWKS or discovery document read.
        public var maxDocumentBytes: Int

        /// Limits with production defaults: a 5 s deadline, max-age clamped to 1 minute … 1 day
        /// (1 hour when absent), an unknown-kid refetch at most every 60 s, documents up to 256 KiB.
        public init(
            fetchTimeout: Duration = .seconds(5),
            minimumMaxAge: TimeInterval = 60,
            maximumMaxAge: TimeInterval = 86_400,
            defaultMaxAge: TimeInterval = 3_600,
            unknownKeyRefetchInterval: TimeInterval = 60,
            maxDocumentBytes: Int = 256 * 1024
        ) {
            self.fetchTimeout = fetchTimeout
            self.minimumMaxAge = minimumMaxAge
            self.maximumMaxAge = maximumMaxAge
            self.defaultMaxAge = defaultMaxAge
            self.unknownKeyRefetchInterval = unknownKeyRefetchInterval
            self.maxDocumentBytes = maxDocumentBytes
        }
    }

    /// The provider whose keys these are.
    public nonisolated let provider: ProviderConfiguration
    /// The limits.
    public nonisolated let policy: Policy
    private let fetcher: ProviderDocumentFetcher

    private var keys: [String: ProviderKey]?
    private var expiresAt = Date.distantPast
    /// The fresh set as last installed, readable without hopping to the actor: a warm cache
    /// answers a known `kid` on the caller's thread (`cachedKey`).
    private nonisolated let snapshot = Mutex<(keys: [String: ProviderKey], expiresAt: Date)?>(nil)
    private var lastUnknownKeyFetch: Date?
    /// The JWKS address: configured, or found by discovery (then kept until a fetch fails).
    private var jwksURL: URL?
    private var inflight: Task<Result<Loaded, ProviderTokenError>, Never>?
    /// How many times the keys were fetched (successfully or not), for tests and metrics.
    public private(set) var fetchCount = 0

    /// A cache for `provider`'s keys, fetched with `httpClient`.
    public init(provider: ProviderConfiguration, httpClient: HTTPClient, policy: Policy = Policy(), logger: Logger) {
        self.provider = provider
        self.policy = policy
        self.fetcher = ProviderDocumentFetcher(
            client: httpClient, timeout: policy.fetchTimeout, maxBytes: policy.maxDocumentBytes, logger: logger)
        if case .jwks(let url) = provider.keySource { jwksURL = url }
    }

    /// The key named `kid` when the cached set is fresh at `now` and has it; nil otherwise (then
    /// `key(for:now:)` decides). No hop to the actor.
    public nonisolated func cachedKey(for kid: String, now: Date) -> ProviderKey? {
        snapshot.withLock { snapshot in
            guard let snapshot, now < snapshot.expiresAt else { return nil }
            return snapshot.keys[kid]
        }
    }

    /// The key named `kid` at `now`: from the cached set while it is fresh, else after a fetch;
    /// an unknown `kid` refetches once per `unknownKeyRefetchInterval`. Throws
    /// `invalid_provider_token` (`unknown_kid`) or `provider_unavailable`.
    public func key(for kid: String, now: Date) async throws(ProviderTokenError) -> ProviderKey {
        var fetched = false
        // A fetch under way (a cold start, a rotation) is joined whatever the limits: its set may hold the key.
        if inflight != nil {
            try await refresh(now: now)
            fetched = true
        }
        if keys == nil || now >= expiresAt {
            try await refresh(now: now)
            fetched = true
        }
        if let key = keys?[kid] { return key }
        if fetched { throw .invalidToken(.unknownKeyID) }
        if inflight != nil {
            try await refresh(now: now)
            if let key = keys?[kid] { return key }
            throw .invalidToken(.unknownKeyID)
        }
        if let last = lastUnknownKeyFetch, now.timeIntervalSince(last) < policy.unknownKeyRefetchInterval, now >= last {
            throw .invalidToken(.unknownKeyID)
        }
        lastUnknownKeyFetch = now
        try await refresh(now: now)
        if let key = keys?[kid] { return key }
        throw .invalidToken(.unknownKeyID)
    }

    /// The `kid`s of the cached set (empty before the first fetch), for tests and diagnostics.
    public var cachedKeyIDs: [String] {
        (keys.map { Array($0.keys) } ?? []).sorted()
    }

    /// A fetched set and how long to keep it.
    struct Loaded: Sendable {
        var keys: [String: ProviderKey]
        var lifetime: TimeInterval
        var jwksURL: URL
    }

    /// Fetches the set, or waits for the fetch already under way, and installs it.
    private func refresh(now: Date) async throws(ProviderTokenError) {
        let task: Task<Result<Loaded, ProviderTokenError>, Never>
        if let inflight {
            task = inflight
        } else {
            let fetcher = self.fetcher
            let provider = self.provider
            let policy = self.policy
            let known = jwksURL
            task = Task { await Self.load(fetcher: fetcher, provider: provider, policy: policy, jwksURL: known) }
            inflight = task
            fetchCount += 1
        }
        let result = await task.value
        if inflight == task { inflight = nil }
        switch result {
        case .success(let loaded):
            keys = loaded.keys
            expiresAt = now.addingTimeInterval(loaded.lifetime)
            snapshot.withLock { [expiresAt] in $0 = (loaded.keys, expiresAt) }
            jwksURL = loaded.jwksURL
        case .failure(let error):
            // A discovered address is looked up again next time (the provider may have moved it).
            if case .discovery = provider.keySource { jwksURL = nil }
            throw error
        }
    }

    /// Discovery when the JWKS address is not known yet, then the JWKS.
    static func load(
        fetcher: ProviderDocumentFetcher, provider: ProviderConfiguration, policy: Policy, jwksURL: URL?
    ) async -> Result<Loaded, ProviderTokenError> {
        do throws(ProviderTokenError) {
            let url: URL
            if let jwksURL { url = jwksURL } else { url = try await discover(fetcher: fetcher, provider: provider) }
            let document = try await fetcher.get(url, provider: provider)
            let set: ProviderKeySet
            do throws(JWKSDocumentError) {
                set = try ProviderKeySet.parse(document.body)
            } catch {
                throw .providerUnavailable(provider: provider.name, detail: "\(url.absoluteString): \(error.detail)")
            }
            let lifetime = min(max(document.maxAge ?? policy.defaultMaxAge, policy.minimumMaxAge), policy.maximumMaxAge)
            return .success(Loaded(keys: set.keys, lifetime: lifetime, jwksURL: url))
        } catch {
            return .failure(error)
        }
    }

    /// The `jwks_uri` of the issuer's discovery document, whose `issuer` must be the configured
    /// one exactly (OpenID Connect Discovery §4.3) and whose `jwks_uri` must pass the same
    /// address rules as the configuration (`https`, or `http` on loopback in test mode).
    static func discover(fetcher: ProviderDocumentFetcher, provider: ProviderConfiguration) async throws(ProviderTokenError) -> URL {
        guard case .discovery(let issuerURL) = provider.keySource else {
            throw .providerUnavailable(provider: provider.name, detail: "no JWKS address is configured")
        }
        let discoveryURL = ProviderConfiguration.discoveryURL(for: issuerURL)
        let document = try await fetcher.get(discoveryURL, provider: provider)
        func unusable(_ detail: String) -> ProviderTokenError {
            .providerUnavailable(provider: provider.name, detail: "\(discoveryURL.absoluteString): \(detail)")
        }
        guard let root = try? JSONSerialization.jsonObject(with: document.body) as? [String: Any] else {
            throw unusable("the discovery document is not a JSON object")
        }
        guard let issuer = root["issuer"] as? String, provider.issuers.contains(issuer) else {
            throw unusable("the discovery document names another issuer than the configured \(provider.issuers[0])")
        }
        guard let text = root["jwks_uri"] as? String, let url = URL(string: text) else {
            throw unusable("the discovery document has no jwks_uri")
        }
        do throws(ProviderConfigurationError) {
            try ProviderConfiguration.checkAddress(url, provider: provider.name, allowInsecureLoopback: provider.allowInsecureLoopback)
        } catch {
            throw unusable("its jwks_uri is refused: \(error.message)")
        }
        return url
    }
}
