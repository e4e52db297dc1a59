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
    /// The roles allowed to call it when links are authenticated (CURVE): a server refuses
    /// every other caller with `permission_denied`. A service's own key (its operator's tools)
    /// may call any of its methods. Empty: no other role may.
    public let callers: Set<ServiceCaller>

    /// A method served under `name`; `idempotent` only if calling it again changes nothing more;
    /// callable by `callers` (least privilege: none by default).
    public init(name: String, idempotent: Bool = false, callers: Set<ServiceCaller> = []) {
        self.name = name
        self.idempotent = idempotent
        self.callers = callers
    }
}

/// A role that calls another's methods over an authenticated service link, known to the server
/// by its CURVE public key.
public enum ServiceCaller: String, Sendable, Hashable, CaseIterable {
    /// The HTTP gateway: the public API's calls only.
    case gateway
    /// The identity service (e.g. minting a session for a user it verified).
    case identity
    /// The token service (e.g. the claims of a user at refresh).
    case token
}

/// An empty message, for methods that take or return nothing.
public struct Empty: Codable, Sendable, Hashable {
    /// The empty message.
    public init() {}
}
