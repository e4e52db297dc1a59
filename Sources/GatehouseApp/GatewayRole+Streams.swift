import Foundation
import Gateway

extension GatewayRoleSettings {
    /// The `GATEHOUSE_STREAM_*` keys and `GATEHOUSE_CHANGE_FEED_HEARTBEAT_MS` (`GET /v1/me/events`).
    static func streamSettings(_ config: Config) throws -> StreamSettings {
        var streams = StreamSettings()
        streams.heartbeat = .seconds(try config.int(ConfigTable.streamHeartbeat))
        streams.retryMs = try config.int(ConfigTable.streamRetryMs)
        streams.maxStreams = try config.int(ConfigTable.streamMax)
        streams.maxPerUser = try config.int(ConfigTable.streamMaxPerUser)
        streams.expiryNotice = .seconds(try config.int(ConfigTable.streamExpiryNotice))
        streams.bufferBytes = try config.int(ConfigTable.streamBufferBytes)
        streams.changeFeedHeartbeat = .milliseconds(try config.int(ConfigTable.changeFeedHeartbeatMs))
        return streams
    }
}
