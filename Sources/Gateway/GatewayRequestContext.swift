import Foundation
public import Hummingbird
import Logging
import NIOCore

/// The per-request context: core Hummingbird storage plus the request id and the peer address.
public struct GatewayRequestContext: RequestContext {
    /// Hummingbird's per-request storage (the logger, route parameters, ...).
    public var coreContext: CoreRequestContextStorage
    /// The request id echoed in `X-Request-Id`.
    public var requestID: String = ""
    /// The peer's IP address from the channel (may be a proxy's).
    public let peerIP: String?

    /// A context for a request arriving on `source`'s channel.
    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.peerIP = source.channel.remoteAddress?.ipAddress
    }
}
