import Foundation
import Gateway

extension GatewayRoleSettings {
    /// The `GATEHOUSE_STREAM_*` keys and `GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS` (`GET /v1/me/events`).
    static func streamSettings(_ config: Config) throws -> StreamSettings {
        var streams = StreamSettings()
        streams.heartbeat = .seconds(try config.int(ConfigTable.streamHeartbeat, in: 1...300))
        streams.retryMs = try config.int(ConfigTable.streamRetryMs, in: 0...600_000)
        streams.maxStreams = try config.int(ConfigTable.streamMax, in: 1...1_000_000)
        streams.maxPerUser = try config.int(ConfigTable.streamMaxPerUser, in: 1...1000)
        streams.expiryNotice = .seconds(try config.int(ConfigTable.streamExpiryNotice, in: 0...3600))
        streams.bufferBytes = try config.int(ConfigTable.streamBufferBytes, in: 16_384...4_194_304)
        streams.changeFeedHeartbeat = .milliseconds(try config.int(ConfigTable.changeFeedHeartbeatMs, in: 100...60_000))
        return streams
    }
}
