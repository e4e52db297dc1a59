/// An error that crosses a service boundary: a stable machine-readable `code`, a message that is
/// safe to show a caller, and optional string details (for example the reasons behind
/// `weak_password`). Causes that must not leave the process are logged, never put here.
///
/// Wire form (`proto/envelope.proto`, `gatehouse.v1.Error`): `code = 1`, `message = 2`,
/// `details = 3` (map<string,string>).
public struct RPCError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The stable error code, for example `email_exists`.
    public var code: ErrorCode
    /// A human-readable message, safe to return to a client.
    public var message: String
    /// Extra machine-readable context.
    public var details: [String: String]

    /// An error with `code`, a `message` safe to show, and optional `details`.
    public init(_ code: ErrorCode, _ message: String, details: [String: String] = [:]) {
        self.code = code
        self.message = message
        self.details = details
    }

    enum CodingKeys: Int, CodingKey {
        case code = 1
        case message = 2
        case details = 3
    }

    /// The `details` key of an error that says when to retry, in whole seconds (`too_many_attempts`).
    public static let retryAfterKey = "retryAfter"
    /// The `details` key naming a session the failed call revoked (`token.refresh` on reuse, or
    /// for a deleted or disabled user): the caller can refuse its access tokens at once.
    public static let sessionIDKey = "sessionID"

    /// `code: message`, for logs.
    public var description: String { "\(code.rawValue): \(message)" }
}

/// Errors that know their wire form. A handler may throw any error; one that is not an
/// `RPCError` and does not conform to this protocol travels as `internal`.
public protocol RPCErrorConvertible: Error {
    /// This error as it travels: its stable code, a safe message and details.
    var rpcError: RPCError { get }
}

/// A stable, snake_case error code. Services add their own codes in extensions.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    /// The code as it travels on the wire, e.g. `email_exists`.
    public var rawValue: String
    /// The code with this wire text.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Lets a code be written as a string literal (`"email_exists"`).
    public init(stringLiteral value: String) { self.rawValue = value }
    /// Reads a code encoded as a bare string.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }
    /// Writes the code as a bare string, so it is a protobuf `string` field.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
    /// The wire text.
    public var description: String { rawValue }
}
