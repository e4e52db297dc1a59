import GatehouseProtocol
import ProtoCodec

/// The protocol version this build speaks. A server answers any other version with
/// `unsupported_version`. See proto/PROTOCOL.md for how it evolves.
public let rpcProtocolVersion: UInt32 = 1

/// First frame of a request (`gatehouse.v1.RequestHeader`). The second frame is the body.
struct RequestHeader: Codable, Sendable, Equatable {
    var version: UInt32
    var requestID: UInt64
    var method: String
    /// How long the caller waits, in milliseconds from when it sent the request (0: server default).
    var timeoutMs: UInt32
    /// W3C trace context, if any.
    var traceParent: String

    enum CodingKeys: Int, CodingKey {
        case version = 1
        case requestID = 2
        case method = 3
        case timeoutMs = 4
        case traceParent = 5
    }

    /// Finds field 2 (the request id) in a header that does not decode as a whole, so the server
    /// can still answer `malformed_request`. Returns nil when it cannot be read.
    static func peekRequestID(_ bytes: [UInt8]) -> UInt64? {
        var i = 0
        func varint() -> UInt64? {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while i < bytes.count, shift < 64 {
                let b = bytes[i]
                i += 1
                result |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return result }
                shift += 7
            }
            return nil
        }
        while i < bytes.count {
            guard let key = varint() else { return nil }
            let field = key >> 3
            switch key & 7 {
            case 0:
                guard let value = varint() else { return nil }
                if field == 2 { return value }
            case 1: i += 8
            case 5: i += 4
            case 2:
                guard let length = varint(), length <= UInt64(bytes.count - i) else { return nil }
                i += Int(length)
            default: return nil
            }
        }
        return nil
    }
}

/// First frame of a reply (`gatehouse.v1.ReplyHeader`). The second frame is the body, empty
/// when `error` is present.
struct ReplyHeader: Codable, Sendable, Equatable {
    var requestID: UInt64
    var error: RPCError?

    enum CodingKeys: Int, CodingKey {
        case requestID = 1
        case error = 2
    }
}
