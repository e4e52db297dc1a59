/// A typed RPC method: its wire name and its request and response types, so the compiler
/// checks both ends of every call.
///
/// ```swift
/// extension RPCMethod where Request == PingRequest, Response == PingReply {
///     static let ping = RPCMethod(name: "test.ping", idempotent: true)
/// }
/// ```
public struct RPCMethod<Request: Codable & Sendable, Response: Codable & Sendable>: Sendable {
    /// The wire name, `service.method`.
    public let name: String
    /// Whether a client may retry the call after a timeout or reconnect without changing its effect.
    public let idempotent: Bool

    /// A method served under `name`; `idempotent` only if calling it again changes nothing more.
    public init(name: String, idempotent: Bool = false) {
        self.name = name
        self.idempotent = idempotent
    }
}

/// An empty message, for methods that take or return nothing.
public struct Empty: Codable, Sendable, Hashable {
    /// The empty message.
    public init() {}
}
