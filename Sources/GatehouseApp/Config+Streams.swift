import Foundation

/// The configuration keys of the change log and `GET /v1/me/events` (issue 21).
extension ConfigTable {
    /// Where a gateway subscribes to the identity service's `user.changed`.
    public static let identityEventsURL = ConfigKey(env: "GATEHOUSE_IDENTITY_EVENTS_URL", defaultValue: "tcp://127.0.0.1:7002", secret: false, roles: "gateway", help: "Where to subscribe to user changes (`user.changed`, for `GET /v1/me/events`): the identity service's GATEHOUSE_IDENTITY_EVENTS_BIND.")
    /// The identity service's change-feed heartbeat.
    public static let changeFeedHeartbeatMs = ConfigKey(env: "GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS", defaultValue: "1000", secret: false, range: 100...60_000, roles: "serve, identity, gateway", help: "Milliseconds between the identity service's `identity.heartbeat`s (100–60000), by which a gateway notices lost `user.changed` events and catches up from the change log. Use the same value for both roles.")
    /// How long the change log keeps a change.
    public static let changeLogRetention = ConfigKey(env: "GATEHOUSE_CHANGE_LOG_RETENTION", defaultValue: "86400", secret: false, range: 60...2_592_000, roles: "serve, identity", help: "Seconds the change log keeps a user's change (60–2592000) for streams that resume with `Last-Event-ID`; an older position gets a fresh snapshot (`resync`).")
    /// The most changes the log keeps per user.
    public static let changeLogMaxPerUser = ConfigKey(env: "GATEHOUSE_CHANGE_LOG_MAX_PER_USER", defaultValue: "1000", secret: false, range: 10...100_000, roles: "serve, identity", help: "Most changes the change log keeps per user (10–100000); older ones are pruned (a stream resuming before them gets a fresh snapshot).")
    /// Seconds between a stream's heartbeat comments.
    public static let streamHeartbeat = ConfigKey(env: "GATEHOUSE_STREAM_HEARTBEAT", defaultValue: "25", secret: false, range: 1...300, roles: "serve, gateway", help: "Seconds between the heartbeat comments of an open `GET /v1/me/events` stream (1–300), so proxies keep the connection.")
    /// The `retry:` hint of a stream.
    public static let streamRetryMs = ConfigKey(env: "GATEHOUSE_STREAM_RETRY_MS", defaultValue: "3000", secret: false, range: 0...600_000, roles: "serve, gateway", help: "The `retry:` hint (milliseconds, 0–600000) sent at the start of each `GET /v1/me/events` stream: how long a client waits before it reconnects.")
    /// The most open streams of one gateway.
    public static let streamMax = ConfigKey(env: "GATEHOUSE_STREAM_MAX", defaultValue: "10000", secret: false, range: 1...1_000_000, roles: "serve, gateway", help: "Most open `GET /v1/me/events` streams on this gateway; past it a new one is refused with 503 `too_many_streams`. Streams also count against GATEHOUSE_HTTP_MAX_CONNECTIONS.")
    /// The most open streams of one user on one gateway.
    public static let streamMaxPerUser = ConfigKey(env: "GATEHOUSE_STREAM_MAX_PER_USER", defaultValue: "10", secret: false, range: 1...1000, roles: "serve, gateway", help: "Most open `GET /v1/me/events` streams of one user on this gateway; a new one past it closes the user's oldest with a `closed` event (`too_many_streams`).")
    /// How long before its access token expires a stream is told.
    public static let streamExpiryNotice = ConfigKey(env: "GATEHOUSE_STREAM_EXPIRY_NOTICE", defaultValue: "60", secret: false, range: 0...3600, roles: "serve, gateway", help: "Seconds before the access token expires that a stream gets its `token_expiring` event (0–3600); the stream closes at the expiry (`closed`, `token_expired`).")
    /// The most bytes queued for one stream.
    public static let streamBufferBytes = ConfigKey(env: "GATEHOUSE_STREAM_BUFFER_BYTES", defaultValue: "65536", secret: false, range: 16_384...4_194_304, roles: "serve, gateway", help: "Most bytes of events queued for one stream whose client reads slowly (16384–4194304); past it the stream is closed (the client resumes with `Last-Event-ID`).")

    /// The keys above, in `ConfigTable.all`.
    static let streamKeys = [
        identityEventsURL, changeFeedHeartbeatMs, changeLogRetention, changeLogMaxPerUser, streamHeartbeat, streamRetryMs, streamMax,
        streamMaxPerUser, streamExpiryNotice, streamBufferBytes,
    ]
}
