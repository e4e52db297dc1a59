import Foundation
public import Hummingbird
import Logging
public import NIOCore

/// The per-request context: core Hummingbird storage plus the request id and the peer address.
public struct GatewayRequestContext: RequestContext {
    /// Hummingbird's per-request storage (the logger, route parameters, ...).
    public var coreContext: CoreRequestContextStorage
    /// The request id echoed in `X-Request-Id`.
    public var requestID: String = ""
    /// The peer's IP address from the channel (may be a proxy's).
    public let peerIP: String?
    /// The connection (`GET /v1/me/events` closes it for a client that does not read, and
    /// notices when it goes).
    public let channel: any Channel

    /// A context for a request arriving on `source`'s channel.
    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.peerIP = source.channel.remoteAddress?.ipAddress
        self.channel = source.channel
    }
}
