// The RPC envelope (proto/envelope.proto, package gatehouse.v1): the first frame of every
// request and reply. GatehouseRPC adds the hand-written fast encoders for the hot path.

/// First frame of a request (`gatehouse.v1.RequestHeader`). The second frame is the body.
public struct RequestHeader: Codable, Sendable, Equatable {
    /// The caller's protocol version; another version is answered `unsupported_version`.
    public var version: UInt32
    /// Chosen by the caller, unique among its calls in flight; echoed in the reply.
    public var requestID: UInt64
    /// `service.method`.
    public var method: String
    /// How long the caller waits, in milliseconds from when it sent the request (0: server
    /// default): what is left of its deadline, which a service passes on when it calls another.
    public var timeoutMs: UInt32
    /// W3C trace context (`traceparent`), if any; passed on unchanged through every hop.
    public var traceParent: String

    /// A header with every field given.
    public init(version: UInt32, requestID: UInt64, method: String, timeoutMs: UInt32, traceParent: String) {
        self.version = version
        self.requestID = requestID
        self.method = method
        self.timeoutMs = timeoutMs
        self.traceParent = traceParent
    }

    enum CodingKeys: Int, CodingKey {
        case version = 1
        case requestID = 2
        case method = 3
        case timeoutMs = 4
        case traceParent = 5
    }
}

/// First frame of a reply (`gatehouse.v1.ReplyHeader`). The second frame is the body, empty
/// when `error` is present.
public struct ReplyHeader: Codable, Sendable, Equatable {
    /// The request id of the call this answers.
    public var requestID: UInt64
    /// Present when the call failed.
    public var error: RPCError?

    /// A reply header for `requestID`, failed when `error` is given.
    public init(requestID: UInt64, error: RPCError? = nil) {
        self.requestID = requestID
        self.error = error
    }

    enum CodingKeys: Int, CodingKey {
        case requestID = 1
        case error = 2
    }
}
