/// Settings of `GET /v1/me/events` (Server-Sent Events of the caller's user; `StreamHub`).
public struct StreamSettings: Sendable {
    /// Time between the `: keep-alive` comments of an open stream (`GATEHOUSE_STREAM_HEARTBEAT`).
    /// Each tick also checks every stream's session against the revocation list. Default 25 s.
    public var heartbeat: Duration = .seconds(25)
    /// The `retry:` hint written first on each stream, in milliseconds (`GATEHOUSE_STREAM_RETRY_MS`). Default 3000.
    public var retryMs: Int = 3000
    /// Most open streams on this gateway; past it 503 `too_many_streams` (`GATEHOUSE_STREAM_MAX`). Default 10 000.
    public var maxStreams: Int = 10_000
    /// Most open streams of one user; a new one closes the user's oldest (`closed`, `too_many_streams`)
    /// (`GATEHOUSE_STREAM_MAX_PER_USER`). Default 10.
    public var maxPerUser: Int = 10
    /// How long before the access token's `exp` a stream gets `token_expiring`
    /// (`GATEHOUSE_STREAM_EXPIRY_NOTICE`). Default 60 s.
    public var expiryNotice: Duration = .seconds(60)
    /// Most bytes of events queued for one stream whose client does not read; past it the
    /// connection is closed (`GATEHOUSE_STREAM_BUFFER_BYTES`). Default 64 KiB.
    public var bufferBytes: Int = 65_536
    /// The identity service's change-feed heartbeat (`GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS`): a feed
    /// silent for three of them is polled with `identity.listChanges` while streams are open. Default 1 s.
    public var changeFeedHeartbeat: Duration = .seconds(1)
    /// How often the hub checks token expiry (and heartbeats) against the wall clock. Default 250 ms.
    var tick: Duration = .milliseconds(250)

    /// The defaults above.
    public init() {}
}
